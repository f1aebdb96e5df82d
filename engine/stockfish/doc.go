// Package stockfish runs a pool of Stockfish processes over UCI and answers
// fixed-depth MultiPV analyses of chess positions, with a cache that survives
// runs. It holds no Lua and no RookWorld formats; the rewards of
// engine/rookworld are judged against its analyses.
//
// # Parts
//
//	uci.go      Score (side to move, mate conversion) and the UCI info-line parser
//	process.go  one engine process: handshake, fixed-depth MultiPV search, kill
//	pool.go     Pool: workers, per-request timeout, restart and retry, shared searches
//	cache.go    in-memory cache and the append-only JSONL cache file
//
// # Searches
//
// A Pool runs Workers UCI processes of the engine FindEngine resolves:
// Config.Path, else stockfish on PATH, else /usr/games/stockfish (Debian's
// stockfish package). Every search sends ucinewgame and runs single-threaded
// to a fixed depth, so a result depends only on (engine, FEN, depth, MultiPV):
// the same request gives the same lines on any worker, in any order. Every
// "info … multipv k … pv …" line is parsed (ParseInfo); the last exact line per
// rank is kept and its first PV move checked for legality. UCI scores are
// already from the side to move; Score keeps centipawns or moves to mate and
// converts to pawns as the data does. A position without a legal move is
// answered without the engine (Analysis.Terminal). Identical requests in
// flight share one search. Results are
// cached in memory by FEN+depth+MultiPV and, with CacheFile, appended as one
// JSON line each (one write per line, O_APPEND) to a file read back on the next
// start: a line that is not a valid analysis refuses the file with its
// file:line; entries from another engine version are ignored. Close kills the
// processes.
//
// # Failures
//
// Settings are never replaced silently: Config.Validate refuses a depth or
// worker count below 1 naming the setting, and a missing engine is one error
// (ErrNotFound) that says how to install it. Each engine runs in a process
// group of its own with pipes this process owns: a crashed, killed or hung
// engine is killed with SIGKILL to the whole group (a wrapper script's
// children included), reaped within a bound, and our pipe ends are closed, so
// no wait depends on another process closing a pipe; every write has a
// deadline. The engine's exit status and the end of its stderr go into the
// error. A failed attempt is retried on a fresh engine up to Retries times,
// then the request fails with an error naming the FEN and the time lost. Every
// step of an attempt is bounded, and PositionTimeout, when set, bounds all the
// attempts at a position together, so the time a failing engine can cost one
// position is at most Config.MaxLoss; the time it did cost is counted in
// PoolStats.LostSeconds.
package stockfish

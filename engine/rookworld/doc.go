// Package rookworld is the RookWorld world of rookscript: the task formats
// (P: policy, A: environment), whitespace-tolerant parsers for completions,
// prompts and training strings, the environment step, graduated rewards and
// evaluation metrics, position sources with resumable cursors, the task mix a
// prompt stream draws from, and a builder for RookWorld training text. It
// holds no Lua; the chess rules come from engine/chess and the engine's
// judgement from engine/stockfish. Its API is plain structs, context.Context
// on anything slow, and errors that name the file, line or field at fault.
//
// # Parts
//
//	format.go     building P: and A: prompts and targets, Python float formatting, TokenBoundary, PromptBoundary
//	parse.go      parsers for completions, prompts and training strings
//	stop.go       AnswerEnd: where the model card stops an answer (rollout's "rookworld" stop rule)
//	env.go        EnvStep, EnvStepAfter, Step, Play: the A: task's transition and its rewards
//	history.go    HistoryFor: the game behind an A: prompt whose answer needs it (fivefold repetition)
//	validate.go   ValidatePosition: the positions sources and EnvStep accept
//	reward.go     Scorer: reward components, weights, floors, shaping, batch scoring
//	metrics.go    evaluation metrics over scored answers
//	source.go     Source, Cursor, Item; FEN/EPD and training-string file sources
//	pgnsource.go  the PGN position source (positions sampled per game)
//	datasource.go DataSource: positions from parquet and JSONL data sets (engine/dataset)
//	generate.go   seeded game generator (random, opening-style, engine-guided)
//	mix.go        Mix: which task each item of a source becomes, drawn from the seed and index
//	dataset.go    BuildDataset: RookWorld training text labelled by Stockfish and the rules
//
// # Formats: what was confirmed and what was inferred
//
// Confirmed from the public generator code of RookWorld (jorahn/RookWorld:
// dev/data/rook/generate_lichess.py, dev/data/arbiter/generate_rollouts.py and
// make_dataset.py, dev/data/rookworld_evol/make_dataset.py) and its committed
// validation rows:
//
//   - Policy rows are f"P: {fen:90}M: {moves:30}E: {evals:40}B: {best}":
//     each field left-aligned and space-padded to at least 90, 30 and 40
//     characters, longer fields unpadded (PolicyText).
//   - E: values are python-chess's score(mate_score=100000)/100 relative to the
//     side to move, written with Python's str(): "-2.0", "-2.07", "0.3". A mate
//     in n therefore reads ±(1000 − n/100) ("999.97" for mate in 3), being
//     mated now −1000.0 (Score.Pawns, FormatEval). DESIGN's "mate = ±1000.0" is
//     the limit of this; the data itself holds 999.97-style values, and so do
//     the rows built here.
//   - A position with fewer than five legal moves has fewer M:/E: entries.
//   - The public generator shuffled the M:/E: pairs and took B: from the
//     unshuffled MultiPV list: the first line with white to move, the last
//     (the worst of the five) with black to move. BuildDataset writes MultiPV
//     order and B: = Stockfish's best by default; DatasetOptions.
//     ShuffleCandidates and PublicBestQuirk reproduce the public rows.
//     Rewards always judge B: against Stockfish, never against a label.
//   - Environment rows are {fen}+{move}+{recent moves}+{new fen}+{reward}+
//     {terminated}+{truncated}, the recent moves being the last ten including
//     this one, the reward written with str(float) (0.001, 1.0, 0.5, -1.0),
//     flags as 0/1; RookWorld rows carry the prefix "A: " (one public build
//     appends a trailing space, which the parsers ignore). The new FEN is
//     python-chess's board.fen(), terminated is board.is_game_over() (automatic
//     rules only, no draw claims), a win pays the mover 1.0 and a draw 0.5.
//
// Inferred or decided here:
//
//   - Prompts are token prefixes of their training text (TokenBoundary,
//     DESIGN §3). RookWorld-LM was trained by llm.c on whole rows tokenized as
//     one text, where GPT-2's BPE joins the FEN's last pad space to "M"
//     (" M"). PolicyPrompt(fen, true) is therefore the padded FEN less its
//     last space, and the answer after it begins " M: …"; PolicyPrompt(fen,
//     false) is the model card's "P: <fen>", after which the model writes the
//     padding. ParseSample splits training strings at the same boundary. A:
//     prompts end with '+', a boundary already.
//   - A: answers are accepted in the data's form and in the model card's, with
//     a final '+' ("…+0.001+0+0+"), and with surrounding whitespace; any other
//     trailing text is malformed. The new FEN is judged in either en-passant
//     convention (EnvResult.FENMatches): python-chess's, which the data and
//     EnvStep write, and the FEN standard's, a square after every two-square
//     push, which the card's example writes.
//   - The public rollouts pushed moves without a legality check (python-chess's
//     push does not validate), so its rows for well-formed illegal moves show a
//     corrupted board, some even without a king (DESIGN's A: example is such a
//     position). Following DESIGN, an illegal or malformed move here leaves the
//     board unchanged with reward -1.0 and truncated=1, and terminated says
//     whether the unchanged position is already over (normally 0).
//   - Positions that cannot arise in a legal game are refused
//     (ValidatePosition): a side without its king or with two, the side not
//     to move in check, pawns on the first or last rank, more than 16 pieces
//     or 8 pawns a side, a castling right whose king or rook is away from its
//     original square, an en-passant square no pawn can just have passed.
//     python-chess's Board(fen) loads most of these (its is_valid does not)
//     and engine/chess still plays them, but Stockfish cannot search them and
//     training must not meet them: sources reject them, naming file and line,
//     or skip them with SkipInvalid; EnvStep returns an error. The corrupt
//     public A: rows above (DESIGN's A: example among them) are therefore
//     refused, not judged.
//   - Public P: rows were analysed with a 0.1 s time limit; rows and rewards
//     here use a fixed depth, which is what makes them reproducible.
//   - The null move "0000" counts as malformed (python-chess would play it).
//
// # Rewards (Scorer)
//
// The task comes from the prompt's prefix; batches may mix tasks and are
// scored in parallel through the pool. Components, each in [0,1]:
//
// Policy (P:), judged against the pool's analysis of the prompt's FEN:
//
//	format       fraction of M:, E:, B: that parse (M: 1–5 UCI tokens; E: one number per M: token; B: one UCI token)
//	moves_legal  fraction of M: tokens that are legal moves
//	best_legal   1 if B: is legal
//	best_rank    RankCredit[k-1] if B: is the engine's line k (default 1.0, 0.7, 0.7, 0.5, 0.5), LegalCredit (0.1) if legal elsewhere, 0 if illegal
//	candidates   distinct M: moves among the engine's lines / number of lines
//	eval         1 − mean over M: of min(|E − engine eval of that move|, EvalClip)/EvalClip (clip 2 pawns; an illegal move counts 1);
//	             a move among the lines takes its line's score, any other legal move the negated score of a MultiPV-1 search one ply shallower after it
//
// Environment (A:), judged by the rules on the prompt's FEN and move, with
// the game that led there where it is known (below):
//
//	format        fraction of the four fields that parse (a valid FEN, a number, two flags 0/1)
//	fen_exact     1 if the new FEN equals the rules' FEN exactly, in either en-passant convention
//	fen_similarity normalised Levenshtein similarity to the rules' FEN (the nearer convention)
//	fen_ranks     the share of the FEN's board ranks that hold eight squares (RankShape; 1 for every position)
//	flags         fraction of terminated, truncated that are right
//	reward_field  1 if the reward field equals the rules' reward numerically
//
// Total: the weighted mean of the components (weights in RewardConfig; the
// FEN weight applies to fen_similarity instead of fen_exact with FENPartial),
// mapped by Shaping (linear t, centered 2t−1, strict all-or-nothing); a
// well-formed policy answer whose B: is illegal gets IllegalFloor (−0.1). An
// answer that parses not at all, or (TruncatedFloor) was cut by
// max_new_tokens, gets MalformedFloor F (−0.3). One that parses in part
// (0 < format < 1: an A: FEN that is not a position, a P: answer missing a
// field) gets, with PartialCredit (the default), F + (L − F)·(1 + t)/3, where L
// is LowestWellFormed (a lower bound on every well-formed total: 0.1 for A:,
// −0.1 for P: by default) and t its unshaped weighted mean (for A: with the
// FEN weight on fen_ranks), so that well-formed > partly parsed >
// unparseable and every total lies in [F, 1]; without it, F. Validate refuses
// PartialCredit where F is not below L. Components are reported
// either way (Result.Components, Components.Map). A sampled completion (one
// whose Input gives its Tokens and MaxNewTokens) also gets SoftOverlong's
// penalty by its length (DAPO's soft overlong punishment, off by default),
// added to its total and kept in Result.Overlong: totals then lie in
// [F − penalty_factor, 1], and the classes keep their order among answers of
// one length. For a fixed depth the
// rewards are deterministic. An empty batch gives an empty result; an answer
// that cannot be scored (bad prompt, engine failure) carries Error and makes
// the batch call return an error naming its index, so nothing is silently
// scored as zero.
//
// # Metrics
//
// ComputeMetrics averages over the scored answers of each task (answers with
// Error skipped; a malformed answer counts as a miss):
//
//	p_format        share of P: answers whose M:, E: and B: all parse (format = 1)
//	p_legal_best    share whose B: is a legal move
//	p_best_acc      share whose B: equals Stockfish's best move (MultiPV line 1)
//	p_top5_legal    mean of (distinct legal M: moves) / min(5, legal moves in the position)
//	p_top5_overlap  mean of (distinct M: moves among Stockfish's lines) / (number of lines = min(5, legal moves))
//	a_format        share of A: answers whose four fields all parse
//	a_fen_exact     share whose new FEN is exactly the rules' FEN
//	a_flags_acc     share with both terminated and truncated right
//	a_reward_acc    share whose reward field is right
//
// # Position sources and data
//
// Sources stream Items (FEN, optional history, the next move when known) and
// expose a Cursor, a small JSON-serialisable struct (byte offset, line, random
// state, counts) from which Restore continues exactly: FEN/EPD files, PGN
// files (positions sampled per game with a seeded PCG), training-string files
// (text lines, parsed into prompt and target), data sets (DataSource: parquet,
// JSONL and gzipped JSONL files or directories of Hugging Face-style shards,
// whose rows are training strings or a fen column with an optional task
// column; the cursor is the file and its rows consumed), and the Generator
// (seeded random or opening-style play, optionally following the engine). Bad
// records, illegal positions included (for PGN, a FEN tag's), are errors
// naming file and line (a data set's: file, row and column, *RowError and
// *dataset.Error), or are counted and skipped with SkipInvalid.
//
// PGN files and the Generator know each position's game from its start
// (Item.StartFEN, Item.History); the other sources know at most the recent
// moves. That history decides one thing: terminated is python-chess's
// is_game_over(), whose fivefold repetition (FIDE's: the same placement, side
// to move, castling rights and en-passant captures, a fifth time since the
// last irreversible move) an A: prompt's ten recent moves cannot show. The
// dataset builder, and the scorer given Input.StartFEN and History (which
// HistoryFor gives for the prompts that need them), judge with the game
// (EnvStepAfter), so a draw by repetition scores 1.0 and "the game goes on"
// less. For sources
// without a full history (FEN/EPD files, training text, a prompt alone) the
// bare FEN is judged (EnvStep), as before: there the draw's answer scores
// 0.775 with the default weights and "the game goes on" 1.0, even for a
// training-text row whose own target (written with the game) is the draw.
// Threefold repetition is only claimable, so it never sets terminated.
//
// BuildDataset turns a source into training text: P: rows labelled by the
// pool, A: rows labelled by the rules with the item's game (optionally with a
// share of illegal moves), the same bytes for the same seed and depth.
package rookworld

// Writes npm_text.parquet and npm_fen.parquet beside this script with a parquet writer other
// than the one this package reads with: hyparquet-writer@0.17.0 (npm, pure JavaScript).
//
// Run from a scratch folder outside the repository:
//
//	npm install hyparquet-writer@0.17.0
//	node path/to/engine/dataset/testdata/gen_npm_parquet.mjs
//
// TestNPMParquet holds the reader to the rows below; change both together.

import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

// The package is installed where the script is run, not beside it.
const resolved = createRequire(join(process.cwd(), 'noop.js')).resolve('hyparquet-writer')
const { parquetWriteBuffer } = await import(pathToFileURL(resolved).href)
const here = dirname(fileURLToPath(import.meta.url))

const text = [
  'P: r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6                          M: c6d5 a6b4 c8d7 a6c7 a6b8      E: -2.0 -2.07 -2.92 -2.79 -2.66            B: c8d7',
  'A: 5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58+b3d5+e1e3 a2b3 f7f2 b5b4 g5g7 b4c3 f2f8 c3c2 d4d5 b3d5+5R2/6R1/8/3b4/p7/4R2P/2p3P1/6K1 w - - 0 59+0.001+0+0',
  'P: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1                                  M: e2e4 d2d4 g1f3 c2c4 e2e3      E: 0.3 0.3 0.25 0.2 0.1                    B: e2e4',
  'A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0',
  'P: 8/8/8/8/8/5k2/8/5K1q w - - 0 80                                                           M: f1e1                           E: -1000.0                                 B: f1e1',
  'P: r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6                          M: c6d5 a6b4 c8d7 a6c7 a6b8      E: -2.0 -2.07 -2.92 -2.79 -2.66            B: c8d7',
  'A: 8/8/8/8/8/5k2/8/5K1q w - - 0 80+f1e2+f1e2+8/8/8/8/8/5k2/8/5K1q w - - 0 80+-1.0+0+1',
]
writeFileSync(join(here, 'npm_text.parquet'), new Uint8Array(parquetWriteBuffer({
  columnData: [
    { name: 'source', data: text.map((_, i) => i * 10), type: 'INT32' },
    { name: 'text', data: text, type: 'STRING' },
    { name: 'note', data: ['é', null, 'ok', null, '♜', null, ''], type: 'STRING' },
  ],
  rowGroupSize: 3,
  createdBy: 'hyparquet-writer 0.17.0',
})))

const fen = [
  'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1',
  'r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6',
  '5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58',
  '8/8/8/8/8/5k2/8/5K1q w - - 0 80',
  'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1',
]
writeFileSync(join(here, 'npm_fen.parquet'), new Uint8Array(parquetWriteBuffer({
  columnData: [
    { name: 'fen', data: fen, type: 'STRING', nullable: false },
    { name: 'task', data: ['P', 'A', null, 'P', 'A'], type: 'STRING' },
  ],
  rowGroupSize: 2,
  codec: 'UNCOMPRESSED',
  createdBy: 'hyparquet-writer 0.17.0',
})))

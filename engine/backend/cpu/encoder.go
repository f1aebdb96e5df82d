package cpu

import "github.com/rookscript/rookscript/engine/backend"

type encoderJob struct {
	backward      bool
	out, wte, wpe []float32 // forward: out; backward: out is dout, wte/wpe are gradients
	tok, pos      []int32
	c             int
}

func (j *encoderJob) run(_, lo, hi int) {
	c := j.c
	if !j.backward {
		for i := lo; i < hi; i++ {
			o := j.out[i*c : (i+1)*c]
			te := j.wte[int(j.tok[i])*c:][:c]
			pe := j.wpe[int(j.pos[i])*c:][:c]
			for k := range o {
				o[k] = te[k] + pe[k]
			}
		}
		return
	}
	// Backward over channels [lo, hi) for every token in order: rows of wte that several
	// tokens share are summed in the same order every time, so the result is deterministic.
	for i := range j.tok {
		d := j.out[i*c+lo : i*c+hi]
		te := j.wte[int(j.tok[i])*c+lo : int(j.tok[i])*c+hi]
		pe := j.wpe[int(j.pos[i])*c+lo : int(j.pos[i])*c+hi]
		for k, v := range d {
			te[k] += v
			pe[k] += v
		}
	}
}

func (c *CPU) Encoder(out backend.Buf, tok, pos backend.I32, wte, wpe backend.Buf, n, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enc = encoderJob{out: out.F32()[:n*ch], wte: wte.F32(), wpe: wpe.F32(), tok: tok.Ints()[:n], pos: pos.Ints()[:n], c: ch}
	c.pool.run(&c.enc, n, max(1, 8192/ch))
	c.enc = encoderJob{}
}

func (c *CPU) EncoderBackward(dwte, dwpe, dout backend.Buf, tok, pos backend.I32, n, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enc = encoderJob{backward: true, out: dout.F32()[:n*ch], wte: dwte.F32(), wpe: dwpe.F32(), tok: tok.Ints()[:n], pos: pos.Ints()[:n], c: ch}
	c.pool.run(&c.enc, ch, 32)
	c.enc = encoderJob{}
}

type rowsJob struct {
	scatter  bool
	dst, src []float32
	rows     []int32
	c        int
}

func (j *rowsJob) run(_, lo, hi int) {
	c := j.c
	for i := lo; i < hi; i++ {
		r := int(j.rows[i])
		if j.scatter {
			copy(j.dst[r*c:(r+1)*c], j.src[i*c:(i+1)*c])
		} else {
			copy(j.dst[i*c:(i+1)*c], j.src[r*c:(r+1)*c])
		}
	}
}

func (c *CPU) GatherRows(dst, src backend.Buf, rows backend.I32, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = rowsJob{dst: dst.F32(), src: src.F32(), rows: rows.Ints(), c: ch}
	c.pool.run(&c.rows, rows.N, max(1, 16384/ch))
	c.rows = rowsJob{}
}

func (c *CPU) ScatterRows(dst, src backend.Buf, rows backend.I32, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = rowsJob{scatter: true, dst: dst.F32(), src: src.F32(), rows: rows.Ints(), c: ch}
	c.pool.run(&c.rows, rows.N, max(1, 16384/ch))
	c.rows = rowsJob{}
}

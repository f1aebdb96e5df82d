package grpo

import (
	"errors"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/dist"
)

// deviceSummer is a backend that has joined joined ranks and sums on the device: here it
// records what it was asked to sum.
type deviceSummer struct {
	backend.Backend
	joined int
	summed []backend.Buf
}

func (d *deviceSummer) JoinedRanks() int { return d.joined }
func (d *deviceSummer) SumRanks(x backend.Buf) error {
	d.summed = append(d.summed, x)
	return nil
}

// twoRanks is a world of two whose host sums are counted and do nothing else.
type twoRanks struct {
	dist.Single
	sums int
}

func (*twoRanks) Size() int { return 2 }
func (w *twoRanks) SumF32([]float32) error {
	w.sums++
	return nil
}

// TestSumGradsOnTheDevice: the gradient sum goes to the backend when it has joined the run's
// ranks, through the host when it has joined none, and a backend that joined a world of
// another size is an error.
func TestSumGradsOnTheDevice(t *testing.T) {
	tr, _ := setup(t, 5)
	dev := &deviceSummer{Backend: tr.Policy.B}
	tr.Policy.B = dev
	world := &twoRanks{}
	tr.Comm = world

	dev.joined = 2
	if err := tr.sumGrads(); err != nil {
		t.Fatal(err)
	}
	g := tr.Policy.Grads
	if len(dev.summed) != 1 || dev.summed[0].M != g.M || dev.summed[0].Off != 0 || dev.summed[0].N != g.N || world.sums != 0 {
		t.Fatalf("joined: %d device sums (want 1, of the whole gradient), %d host sums (want 0)", len(dev.summed), world.sums)
	}

	dev.joined, dev.summed = 0, nil
	if err := tr.sumGrads(); err != nil {
		t.Fatal(err)
	}
	if len(dev.summed) != 0 || world.sums != 1 {
		t.Fatalf("not joined: %d device sums (want 0), %d host sums (want 1)", len(dev.summed), world.sums)
	}

	dev.joined = 3
	var re *RanksError
	if err := tr.sumGrads(); !errors.As(err, &re) || *re != (RanksError{Joined: 3, Ranks: 2}) {
		t.Fatalf("a device joined to 3 ranks in a run of 2: %v", err)
	}
}

package optim

// Export copies the moments to the host, in Layout order, so a checkpoint can store them.
func (o *AdamW) Export() (m, v []float32) {
	n := o.model.Layout.Total
	m, v = make([]float32, n), make([]float32, n)
	o.model.B.Download(m, o.M)
	o.model.B.Download(v, o.V)
	return m, v
}

// Restore replaces the moments and the step count with ones from Export, so the next Step
// continues exactly where the exported optimizer would have (bias correction uses steps).
func (o *AdamW) Restore(m, v []float32, steps int) error {
	n := o.model.Layout.Total
	switch {
	case len(m) != n:
		return &RestoreError{What: "first-moment", Got: len(m), Want: n}
	case len(v) != n:
		return &RestoreError{What: "second-moment", Got: len(v), Want: n}
	case steps < 0:
		return &RestoreError{What: "steps", Got: steps}
	}
	o.model.B.Upload(o.M, m)
	o.model.B.Upload(o.V, v)
	o.Steps = steps
	return nil
}

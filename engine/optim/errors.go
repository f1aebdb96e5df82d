package optim

import "fmt"

// ConfigError is a setting of AdamWConfig or Schedule out of its range: the key as recipes
// write it, the value and what it must be.
type ConfigError struct {
	Key     string
	Value   any
	Reason  string   // what Key must be ("≥ 0", "in [0, 1)"); unused when Choices is set
	Choices []string // for a name that must be one of these
}

func (e *ConfigError) Error() string {
	if e.Choices != nil {
		return fmt.Sprintf("%s %q is not one of %q", e.Key, e.Value, e.Choices)
	}
	return fmt.Sprintf("%s must be %s, got %v", e.Key, e.Reason, e.Value)
}

// RestoreError is optimizer state that does not fit the model: moments of another size, or a
// negative step count.
type RestoreError struct {
	What      string // "first-moment", "second-moment" or "steps"
	Got, Want int    // the count given and the model's parameter count (Want is 0 for steps)
}

func (e *RestoreError) Error() string {
	if e.What == "steps" {
		return fmt.Sprintf("adamw: restoring a negative step count %d", e.Got)
	}
	return fmt.Sprintf("adamw: restoring %d %s values, the model has %d parameters", e.Got, e.What, e.Want)
}

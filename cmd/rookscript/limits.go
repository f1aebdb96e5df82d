package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// luaLimits are the --lua-time-limit and --lua-memory flags: zero means the default, and a
// flag given as 0 lifts its limit (luabind.Options' negative values).
type luaLimits struct {
	time   time.Duration
	memory int64
}

// parse takes arg if it is one of the flags: ok says whether it was, err whether its value
// is bad.
func (l *luaLimits) parse(arg string) (ok bool, err error) {
	name, value, _ := strings.Cut(arg, "=")
	switch name {
	case "--lua-time-limit":
		d, err := time.ParseDuration(value)
		if value == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return true, fmt.Errorf("--lua-time-limit=%s: want a duration such as 30s or 5m, or 0 for none", value)
		}
		l.time = d
		if d == 0 {
			l.time = -1
		}
		return true, nil
	case "--lua-memory":
		n, err := humanize.ParseBytes(value)
		if err != nil {
			return true, fmt.Errorf("--lua-memory=%s: want a size such as 512MiB or 2GB, or 0 for none", value)
		}
		l.memory = int64(n)
		if n == 0 {
			l.memory = -1
		}
		return true, nil
	}
	return false, nil
}

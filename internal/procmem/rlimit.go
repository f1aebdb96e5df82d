package procmem

import "syscall"

// AddressLimit is the process's limit on its address space (ulimit -v, RLIMIT_AS) or data
// segment (RLIMIT_DATA), the lower of the two; ok is false when neither is set. Go reserves
// more address space than it fills, so a heap meets this limit before it meets the RAM.
func AddressLimit() (int64, bool) {
	best, ok := int64(0), false
	for _, res := range []int{syscall.RLIMIT_AS, syscall.RLIMIT_DATA} {
		var r syscall.Rlimit
		if syscall.Getrlimit(res, &r) != nil || r.Cur >= 1<<62 { // RLIM_INFINITY is all ones
			continue
		}
		if n := int64(r.Cur); !ok || n < best {
			best, ok = n, true
		}
	}
	return best, ok
}

// Package procmem reads the memory figures Linux publishes under /proc and /sys, in bytes: the
// machine's RAM (MemTotal of /proc/meminfo), the memory this process may use (the RAM, or its
// control group's limit where lower), and a process's peak resident set (VmHWM of
// /proc/<pid>/status), which ResetPeak sets back to the current resident set (5 into
// /proc/self/clear_refs). It is the one reader of those files, shared by the Lua module
// rook.memory (luabind) and the benchmark's memory section (cmd/rookbench).
//
// The figures are the kernel's "Name:   N kB" lines, where a kB is 1024 bytes. Elsewhere than
// Linux the files are missing and every call returns the open error.
package procmem

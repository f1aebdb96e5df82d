//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
*/
import "C"

import (
	"os"
	"unsafe"
)

// cuBLAS and NCCL are opened at run time (dlopen), not linked: a binary linked against one
// major version would not start where another is installed, and NCCL is needed only by a
// data-parallel run on GPUs.

// libCandidates is the file the environment variable env names, or else names, in order.
func libCandidates(env string, names []string) []string {
	if p := os.Getenv(env); p != "" {
		return []string{p}
	}
	return names
}

// dlopenFirst opens the candidates in order and hands each one the dynamic loader finds
// (LD_LIBRARY_PATH, the ld.so cache) to take, with a lookup of its symbols (nil: absent).
// take returns "" to keep the library open, or why it will not do; the library is then closed
// and the next one tried. tried says why each candidate was passed over; ok is false when
// none was kept.
func dlopenFirst(names []string, take func(name string, sym func(string) unsafe.Pointer) string) (tried []string, ok bool) {
	for _, name := range names {
		cs := C.CString(name)
		h := C.dlopen(cs, C.RTLD_NOW|C.RTLD_LOCAL)
		C.free(unsafe.Pointer(cs))
		if h == nil {
			tried = append(tried, C.GoString(C.dlerror()))
			continue
		}
		sym := func(s string) unsafe.Pointer {
			cs := C.CString(s)
			defer C.free(unsafe.Pointer(cs))
			return C.dlsym(h, cs)
		}
		why := take(name, sym)
		if why == "" {
			return tried, true
		}
		C.dlclose(h)
		tried = append(tried, name+": "+why)
	}
	return tried, false
}

package inferscale

/*
#include <inferscale/inferscale.h>
*/
import "C"

import (
	"errors"
	"runtime"
)

// Code is one of the library's status codes. The error codes are also the
// sentinel errors of the package: errors.Is(err, ErrNotFound) holds for every
// error the library raised with INFS_ENOTFOUND, in the manner of syscall.Errno.
type Code int

// The status codes of include/inferscale/common.h.
const (
	OK             Code = C.INFS_OK
	ErrInvalid     Code = C.INFS_EINVAL       // an argument is nil, malformed or inconsistent
	ErrNoMem       Code = C.INFS_ENOMEM       // host memory allocation failed
	ErrIO          Code = C.INFS_EIO          // a read, write, fsync or mmap failed
	ErrNotFound    Code = C.INFS_ENOTFOUND    // no such fact, namespace or file
	ErrMismatch    Code = C.INFS_EMISMATCH    // geometry or identity differs from the store's
	ErrCorrupt     Code = C.INFS_ECORRUPT     // a file failed its checksum or structure checks
	ErrBusy        Code = C.INFS_EBUSY        // another process holds the store for writing
	ErrRange       Code = C.INFS_ERANGE       // a position, block id, k or size is out of range
	ErrUnsupported Code = C.INFS_EUNSUPPORTED // not built in, or not supported for this input
	ErrDevice      Code = C.INFS_EDEVICE      // a CUDA or cuBLAS call failed
	ErrExists      Code = C.INFS_EEXISTS      // the object already exists
	ErrFormat      Code = C.INFS_EFORMAT      // a model or data file is not in the expected format
	ErrBudget      Code = C.INFS_EBUDGET      // a configured memory budget would be exceeded
	ErrCanceled    Code = C.INFS_ECANCELED    // a callback asked to stop
	ErrReadOnly    Code = C.INFS_EREADONLY    // the store was opened read-only
	ErrNotResident Code = C.INFS_ENOTRESIDENT // a fact's KV is in no memory the call can read (Store.Prefetch)
)

// Error is the library's static description of the code.
func (c Code) Error() string {
	return "inferscale: " + C.GoString(C.infs_strerror(C.int(c)))
}

// ErrClosed is returned, inside an *Error with code ErrInvalid, by every
// method called on a Store, Model, Tokenizer or Embedder after its Close (or
// on a nil one).
var ErrClosed = errors.New("inferscale: " + closedMsg)

const closedMsg = "use of a closed handle"

// Error is an error raised by the library or by the binding's own argument
// checks: the status code and the message, which names the function and the
// offending argument.
type Error struct {
	Code    Code
	Message string
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.Error()
	}
	return "inferscale: " + e.Message
}

// Unwrap gives the code, so that errors.Is matches the Code sentinels, and
// the cause where there is one (ErrClosed).
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Code, e.cause}
	}
	return []error{e.Code}
}

// lastError builds the error of a failed call from the calling thread's C
// error state. The caller must hold the OS thread (runtime.LockOSThread) from
// before the failing call until this returns, so that the message is the one
// of that call and not of another goroutine's call on the same thread.
func lastError(rc C.int) error {
	e := &Error{Code: Code(rc)}
	if C.infs_error_last_code() == rc {
		e.Message = C.GoString(C.infs_error_last())
	} else {
		e.Message = C.GoString(C.infs_strerror(rc))
	}
	return e
}

// check makes one C call and turns its status into an error. The library
// keeps the last error's message per thread, so the goroutine stays on one
// OS thread from the call to the read of the message.
func check(call func() C.int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if rc := call(); rc != 0 {
		return lastError(rc)
	}
	return nil
}

// newError is an error raised by the binding itself, before any C call.
func newError(code Code, msg string) error {
	return &Error{Code: code, Message: msg}
}

func closedError(op string) error {
	return &Error{Code: ErrInvalid, Message: op + ": " + closedMsg, cause: ErrClosed}
}

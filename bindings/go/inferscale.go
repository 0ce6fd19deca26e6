// Package inferscale is the Go binding of libinferscale, the library that
// keeps each user's memory facts as a retrieval embedding plus pre-RoPE KV and
// injects the top-k of them straight into an engine's paged KV cache.
//
// A Store is opened with Open and released with Close; it is safe for
// concurrent use by many goroutines, exactly as the C store is safe for many
// threads. Errors are *Error values carrying the library's status code and
// message; test for a kind of error with errors.Is against the Code sentinels
// (ErrNotFound, ErrInvalid, ErrMismatch, ErrBusy, ...).
//
// The library is found through pkg-config (package "inferscale"). The binding
// refuses to build against headers of another major version, and Open refuses
// to run against a loaded library older than the headers it was built with.
package inferscale

/*
#cgo pkg-config: inferscale
#include <stdlib.h>
#include <inferscale/inferscale.h>

// The binding is written against the 0.x ABI. A header of another major
// version stops the build here rather than misbehaving at run time.
#if !defined(INFS_VERSION_MAJOR) || INFS_VERSION_MAJOR != 0
#error "inferscale: this Go binding supports libinferscale 0.x headers only"
#endif
*/
import "C"

import "fmt"

// HeaderVersion is the version of the headers the binding was compiled
// against, as major*10000 + minor*100 + patch.
const HeaderVersion = uint(C.INFS_VERSION_NUMBER)

// ReservedPrefix starts the names of namespaces that belong to the library
// (INFS_RESERVED_PREFIX; the engine keeps its prompt segments in
// "inferscale.segments"): Put, Delete and DropNamespace there fail with
// ErrInvalid; reads are allowed.
const ReservedPrefix = "inferscale."

// Limits the library checks at every entry point.
const (
	NamespaceMax   = int(C.INFS_NAMESPACE_MAX) // bytes of a namespace name
	IdentityMax    = int(C.INFS_IDENTITY_MAX)  // bytes of an identity string
	TextMax        = int(C.INFS_TEXT_MAX)      // bytes of a fact's text
	MetadataMax    = int(C.INFS_METADATA_MAX)  // bytes of a fact's metadata
	FactTokensMax  = int(C.INFS_FACT_TOKENS_MAX)
	RetrieveKMax   = int(C.INFS_RETRIEVE_K_MAX)
	headerMajor    = uint(C.INFS_VERSION_MAJOR)
	versionDivisor = 10000
)

// Version is the version string of the loaded library, e.g. "0.1.0".
func Version() string {
	return C.GoString(C.infs_version_string())
}

// VersionNumber is the version of the loaded library as
// major*10000 + minor*100 + patch.
func VersionNumber() uint {
	return uint(C.infs_version_number())
}

// checkVersion compares the loaded library with the headers: the major
// version must be the same and the library at least as new as the headers
// (a newer minor only adds functions and appends struct fields).
func checkVersion(lib uint) error {
	if lib/versionDivisor != headerMajor || lib < HeaderVersion {
		return &Error{Code: ErrUnsupported, Message: fmt.Sprintf(
			"inferscale: loaded library version %d is not compatible with the headers (%d) the Go binding was built with",
			lib, HeaderVersion)}
	}
	return nil
}

// versionErr is checked by every constructor so that a binding run against
// an incompatible shared library fails with an error before any other call.
var versionErr = checkVersion(VersionNumber())

// CheckVersion reports whether the loaded library is compatible with the
// headers the binding was compiled against.
func CheckVersion() error {
	return versionErr
}

// Features compiled into the loaded library.
type Features struct {
	CUDA  bool
	FAISS bool
	BLAS  bool
}

// LibraryFeatures reports which optional features the loaded library has.
func LibraryFeatures() Features {
	f := uint(C.infs_features())
	return Features{
		CUDA:  f&C.INFS_FEATURE_CUDA != 0,
		FAISS: f&C.INFS_FEATURE_FAISS != 0,
		BLAS:  f&C.INFS_FEATURE_BLAS != 0,
	}
}

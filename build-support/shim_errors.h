// Shared by the C++ shims over libtorch (crates/csam-nn/csrc,
// crates/csam-dist/csrc): how a shim function reports failure. It returns
// NULL on success or a malloc'ed message, which the caller frees with that
// shim's own `*_free_error` export; no C++ exception crosses into Rust.
// Internal linkage only, so both shims can link into one binary.

#pragma once

#include <c10/util/Exception.h>

#include <cstring>
#include <exception>
#include <string>

namespace {

char *copy_message(const std::string &message) { return strdup(message.c_str()); }

// Runs `body`, turning any exception into its message (libtorch's without
// the C++ stack trace).
template <typename F> char *protect(F body) {
  try {
    body();
    return nullptr;
  } catch (const c10::Error &e) {
    return copy_message(e.what_without_backtrace());
  } catch (const std::exception &e) {
    return copy_message(e.what());
  }
}

} // namespace

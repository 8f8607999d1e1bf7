/// \file
/// `FunctionRef<R(Args...)>`: a non-owning reference to a callable.
#pragma once

#include <type_traits>
#include <utility>

namespace bp {

/// A non-owning reference to a callable; only the specialisation
/// `FunctionRef<R(Args...)>` is defined.
template <class Signature>
class FunctionRef;

/// A non-owning reference to a callable of signature `R(Args...)`: two
/// pointers, no allocation. Query callbacks take one so that a lambda with
/// captures costs nothing on the hot path (unlike std::function). The
/// callable must outlive every call through the reference, which is always
/// true for a lambda written in the argument list; never keep a FunctionRef
/// past the call it was passed to. Copies refer to the same callable.
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  /// Refers to `f`, any callable invocable as `R(Args...)`. Implicit, so that
  /// a lambda converts at the call site. Stores only the address of `f`: a
  /// temporary lives to the end of the full expression, long enough for the
  /// call it is passed to and no longer.
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>) FunctionRef(F&& f)
  noexcept  // NOLINT: implicit by design, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  /// Calls the referenced callable with `args` and returns its result.
  /// Undefined once the callable has been destroyed.
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace bp

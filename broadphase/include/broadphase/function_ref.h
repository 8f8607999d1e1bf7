/// FunctionRef<R(Args...)>: a non-owning reference to a callable, two words,
/// no allocation. Query callbacks take one so that a lambda with captures
/// costs nothing on the hot path (unlike std::function). The callable must
/// outlive the call it is passed to, which is always true for a lambda
/// written in the argument list.
#pragma once

#include <type_traits>
#include <utility>

namespace bp {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>) FunctionRef(F&& f)
  noexcept  // NOLINT: implicit by design, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace bp

#pragma once
// The visitor made of lambdas for std::visit over the protocol's event and effect variants.

namespace ddprun::common {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace ddprun::common

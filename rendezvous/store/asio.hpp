#pragma once
// Boost.Asio, included through here: Boost 1.74's awaitable.hpp uses std::exchange without
// including <utility>, which GCC 12's standard headers no longer pull in for it; and GCC's
// -Wnull-dereference reports false positives inside Asio's inlined scheduler code.

// clang-format off
#include <utility>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio.hpp>
#pragma GCC diagnostic pop
// clang-format on

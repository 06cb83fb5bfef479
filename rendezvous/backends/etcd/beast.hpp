#pragma once
// Boost.Beast (HTTP/1.1), included through here for the same reasons
// as rendezvous/store/asio.hpp: GCC's -Wnull-dereference reports false positives inside the
// inlined Asio and Beast code.

// clang-format off
#include "rendezvous/store/asio.hpp"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop
// clang-format on

#pragma once
// Boost.Beast (HTTP/1.1, TLS streams) and Asio SSL, included through here for the same reasons
// as rendezvous/store/asio.hpp: GCC's -Wnull-dereference reports false positives inside the
// inlined Asio and Beast code.

// clang-format off
#include "rendezvous/store/asio.hpp"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#pragma GCC diagnostic pop
// clang-format on

#pragma once
// Stand-in for Gloo's <gloo/common/error.h> (README.md in gloo_declarations): ProcessGroupGloo.hpp
// includes it but uses nothing of it.

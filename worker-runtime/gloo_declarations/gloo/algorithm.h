#pragma once
// Stand-in for Gloo's <gloo/algorithm.h> (README.md beside it): ProcessGroupGloo.hpp includes it
// but uses nothing of it.

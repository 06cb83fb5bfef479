# Writes OUTPUT, a C++ file defining ddprun::train::embedded_corpus() over the bytes of INPUT.
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n\n"
  "namespace ddprun::train {\nnamespace {\nconstexpr char kCorpus[${size}] = {${bytes}};\n}\n"
  "std::string_view embedded_corpus() { return {kCorpus, sizeof kCorpus}; }\n}\n")

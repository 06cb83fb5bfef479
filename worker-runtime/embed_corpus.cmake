# Writes OUTPUT, a C++ file defining ddprun::train::embedded_corpus() over the bytes of INPUT.
# One string literal of \x escapes, 64 bytes a line: the compiler reads it in a blink, where an
# array initialiser of one char constant per byte took seconds.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
set(lines "")
string(LENGTH "${escaped}" escaped_length)
set(line_chars 256)  # 64 bytes, 4 characters each
set(offset 0)
while(offset LESS escaped_length)
  string(SUBSTRING "${escaped}" ${offset} ${line_chars} line)
  string(APPEND lines "    \"${line}\"\n")
  math(EXPR offset "${offset} + ${line_chars}")
endwhile()
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n\n"
  "namespace ddprun::train {\nnamespace {\n// ${size} bytes and the literal's terminating NUL.\n"
  "constexpr char kCorpus[${size} + 1] =\n${lines};\n}  // namespace\n"
  "std::string_view embedded_corpus() { return {kCorpus, ${size}}; }\n}  // namespace ddprun::train\n")

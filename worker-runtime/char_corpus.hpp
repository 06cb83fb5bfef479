#pragma once
// minGPT-ddp's CharDataset without tensors: the text (truncated), its sorted vocabulary of code
// points and the encoded token ids. Sample i is tokens [i, i + block_size] (inputs are the first
// block_size, targets the last block_size). Pure: the caller reads the file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::train {

struct CharCorpus {
  std::vector<char32_t> vocabulary;  // sorted, unique
  std::vector<int64_t> tokens;       // index into vocabulary, one per code point
  int64_t block_size = 0;

  int64_t sample_count() const { return static_cast<int64_t>(tokens.size()) - block_size; }
};

// Decodes UTF-8, keeps the first int(code_points * truncate) code points (as minGPT-ddp does) and
// builds the vocabulary from what is kept. Throws ConfigError (naming `source`) for invalid UTF-8
// or a text too short for one sample of block_size + 1 characters.
CharCorpus make_char_corpus(std::string_view utf8_text, double truncate, int64_t block_size,
                            std::string_view source);

// Text <-> token ids over the corpus's vocabulary, for prompts and generated text. encode_text
// throws ConfigError naming `what` and every character the vocabulary lacks.
std::vector<int64_t> encode_text(const CharCorpus& corpus, std::string_view utf8_text,
                                 std::string_view what);
std::string decode_tokens(const CharCorpus& corpus, const std::vector<int64_t>& tokens);

// A seeded train/test split of the sample indices [0, sample_count), identical on every rank:
// the first int(n * train_split) of a seeded permutation are training samples, the rest test
// samples (random_split semantics, but deterministic).
struct SampleSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> test;
};
SampleSplit split_samples(const std::vector<int64_t>& permutation, double train_split);

}  // namespace ddprun::train

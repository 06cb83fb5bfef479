#include "char_corpus.hpp"

#include <algorithm>
#include <map>

#include "train_config.hpp"

namespace ddprun::train {
namespace {

// Strict UTF-8 decoding: overlong forms, surrogates and truncated sequences are rejected, so a
// binary file passed as data_config.path gets a clear message instead of a nonsense vocabulary.
std::vector<char32_t> decode_utf8(std::string_view text, std::string_view source) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  auto fail = [&](const char* what) {
    throw ConfigError(std::string(source) + ": not UTF-8 text (" + what + " at byte " +
                      std::to_string(i) + ")");
  };
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int length = 0;
    char32_t code = 0;
    if (lead < 0x80) {
      length = 1;
      code = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07;
    } else {
      fail("invalid lead byte");
    }
    if (i + static_cast<size_t>(length) > text.size()) {
      fail("truncated sequence");
    }
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((next & 0xC0) != 0x80) {
        fail("invalid continuation byte");
      }
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      fail("invalid code point");
    }
    out.push_back(code);
    i += static_cast<size_t>(length);
  }
  return out;
}

void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

}  // namespace

CharCorpus make_char_corpus(std::string_view utf8_text, double truncate, int64_t block_size,
                            std::string_view source) {
  auto code_points = decode_utf8(utf8_text, source);
  const auto kept = static_cast<size_t>(static_cast<double>(code_points.size()) * truncate);
  code_points.resize(std::min(kept, code_points.size()));
  if (static_cast<int64_t>(code_points.size()) <= block_size) {
    throw ConfigError(std::string(source) + ": " + std::to_string(code_points.size()) +
                      " characters (after data_config.truncate) are not enough for one sample of "
                      "data_config.block_size + 1 = " +
                      std::to_string(block_size + 1) + " characters");
  }
  CharCorpus corpus;
  corpus.block_size = block_size;
  corpus.vocabulary = code_points;
  std::sort(corpus.vocabulary.begin(), corpus.vocabulary.end());
  corpus.vocabulary.erase(std::unique(corpus.vocabulary.begin(), corpus.vocabulary.end()),
                          corpus.vocabulary.end());
  std::map<char32_t, int64_t> index;
  for (size_t k = 0; k < corpus.vocabulary.size(); ++k) {
    index.emplace(corpus.vocabulary[k], static_cast<int64_t>(k));
  }
  corpus.tokens.reserve(code_points.size());
  for (char32_t c : code_points) {
    corpus.tokens.push_back(index.at(c));
  }
  return corpus;
}

std::vector<int64_t> encode_text(const CharCorpus& corpus, std::string_view utf8_text,
                                 std::string_view what) {
  std::vector<int64_t> tokens;
  std::string missing;
  for (const char32_t code : decode_utf8(utf8_text, what)) {
    const auto it = std::lower_bound(corpus.vocabulary.begin(), corpus.vocabulary.end(), code);
    if (it == corpus.vocabulary.end() || *it != code) {
      std::string shown;
      append_utf8(shown, code);
      if (missing.find("'" + shown + "'") == std::string::npos) {
        missing += (missing.empty() ? "'" : ", '") + shown + "'";
      }
      continue;
    }
    tokens.push_back(it - corpus.vocabulary.begin());
  }
  if (!missing.empty()) {
    throw ConfigError(std::string(what) + " has characters the model's vocabulary (" +
                      std::to_string(corpus.vocabulary.size()) +
                      " characters of data_config.path) lacks: " + missing);
  }
  return tokens;
}

std::string decode_tokens(const CharCorpus& corpus, const std::vector<int64_t>& tokens) {
  std::string text;
  for (const auto token : tokens) {
    append_utf8(text, corpus.vocabulary.at(static_cast<size_t>(token)));
  }
  return text;
}

SampleSplit split_samples(const std::vector<int64_t>& permutation, double train_split) {
  const auto train_count =
      static_cast<size_t>(static_cast<double>(permutation.size()) * train_split);
  SampleSplit split;
  split.train.assign(permutation.begin(),
                     permutation.begin() + static_cast<std::ptrdiff_t>(train_count));
  split.test.assign(permutation.begin() + static_cast<std::ptrdiff_t>(train_count),
                    permutation.end());
  return split;
}

}  // namespace ddprun::train

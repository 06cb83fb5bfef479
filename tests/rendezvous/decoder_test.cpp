// The request decoder alone: captured and documented requests decode to the right fields,
// every truncation asks for more bytes, and every over-limit field is refused at once.

#include <catch2/catch.hpp>

#include "raw_connection.hpp"
#include "rendezvous/store/request_decoder.hpp"

using namespace ddprun::rendezvous::store;
using ddprun::rendezvous::store::testing::hex;

namespace {

std::span<const std::uint8_t> view(const std::string& bytes) {
  return {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
}

DecodeResult decode(const std::string& bytes, WireGeneration generation = WireGeneration::g0,
                    const StoreLimits& limits = {}) {
  return decode_request(view(bytes), generation, limits);
}

}  // namespace

TEST_CASE("captured G0 requests decode to their fields", "[unit]") {
  const auto set = decode(hex("00 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"));
  REQUIRE(set.status == DecodeStatus::complete);
  CHECK(set.request.command == Command::set);
  CHECK(set.request.keys == std::vector<std::string>{"/k1"});
  CHECK(set.request.values == std::vector<std::string>{"v1"});
  CHECK(set.consumed == 22);

  const auto add = decode(hex("03 04 00 00 00 00 00 00 00 2f 63 6e 74 fe ff ff ff ff ff ff ff"));
  REQUIRE(add.status == DecodeStatus::complete);
  CHECK(add.request.command == Command::add);
  CHECK(add.request.integer == -2);

  const auto cas =
      decode(hex("01 03 00 00 00 00 00 00 00 2f 6b 31 02 00 00 00 00 00 00 00 76 31"
                 " 02 00 00 00 00 00 00 00 76 32"));
  REQUIRE(cas.status == DecodeStatus::complete);
  CHECK(cas.request.values == std::vector<std::string>{"v1", "v2"});

  const auto wait = decode(hex("05 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 2f 6b 31"));
  REQUIRE(wait.status == DecodeStatus::complete);
  CHECK(wait.request.command == Command::wait);
  CHECK(wait.request.keys == std::vector<std::string>{"/k1"});

  CHECK(decode(hex("06")).request.command == Command::get_num_keys);
  CHECK(decode(hex("07 01 00 00 00 00 00 00 00 77")).request.command == Command::watch_key);
  CHECK(decode(hex("08 01 00 00 00 00 00 00 00 77")).request.command == Command::delete_key);
}

TEST_CASE("generations number opcodes differently", "[unit]") {
  const std::string seven = hex("07 01 00 00 00 00 00 00 00 77");
  CHECK(decode(seven, WireGeneration::g0).request.command == Command::watch_key);
  CHECK(decode(seven, WireGeneration::g1).request.command == Command::delete_key);
  CHECK(decode(seven, WireGeneration::g2).request.command == Command::get_num_keys);
  CHECK(decode(hex("0d 39 30 00 00"), WireGeneration::g2).request.word == 12345);
  CHECK(decode(hex("0b"), WireGeneration::g1).request.command == Command::cancel_wait);
  CHECK(decode(hex("0c"), WireGeneration::g2).request.command == Command::cancel_wait);
  CHECK(decode(hex("09"), WireGeneration::g0).status == DecodeStatus::invalid);
  CHECK(decode(hex("13"), WireGeneration::g2).status == DecodeStatus::invalid);
  for (const auto generation : {WireGeneration::g0, WireGeneration::g1, WireGeneration::g2}) {
    for (int opcode = 0; opcode < 256; ++opcode) {
      const auto command = command_for_opcode(generation, static_cast<std::uint8_t>(opcode));
      if (command) {
        CHECK(opcode_for_command(generation, *command) == opcode);
      }
    }
  }
}

TEST_CASE("every truncation of a request asks for more bytes", "[unit]") {
  const std::string request =
      hex("0b 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 70 01 00 00 00 00 00 00 00 31"
          " 01 00 00 00 00 00 00 00 71 02 00 00 00 00 00 00 00 32 32");
  for (std::size_t length = 0; length < request.size(); ++length) {
    const auto result = decode(request.substr(0, length), WireGeneration::g2);
    CHECK(result.status == DecodeStatus::need_more);
    CHECK(result.min_bytes > length);
    CHECK(result.min_bytes <= request.size());
  }
  const auto whole = decode(request + hex("07"), WireGeneration::g2);
  REQUIRE(whole.status == DecodeStatus::complete);
  CHECK(whole.consumed == request.size());
  CHECK(whole.request.keys == std::vector<std::string>{"p", "q"});
  CHECK(whole.request.values == std::vector<std::string>{"1", "22"});
}

TEST_CASE("over-limit lengths and counts are refused before their bytes arrive", "[unit]") {
  // A 2^63 key length, an 8 MiB + 1 value, a 131073-key WAIT, each with no body sent.
  const auto key = decode(hex("00 00 00 00 00 00 00 00 80"));
  CHECK(key.status == DecodeStatus::invalid);
  CHECK_THAT(key.error, Catch::Contains("key length 9223372036854775808 exceeds the limit"));
  const auto value = decode(hex("00 01 00 00 00 00 00 00 00 61 01 00 80 00 00 00 00 00"));
  CHECK(value.status == DecodeStatus::invalid);
  CHECK_THAT(value.error, Catch::Contains("value length 8388609"));
  const auto count = decode(hex("05 01 00 02 00 00 00 00 00"));
  CHECK(count.status == DecodeStatus::invalid);
  CHECK_THAT(count.error, Catch::Contains("key count 131073"));
  StoreLimits tight;
  tight.max_key_bytes = 2;
  CHECK(decode(hex("02 03 00 00 00 00 00 00 00"), WireGeneration::g0, tight).status ==
        DecodeStatus::invalid);
  CHECK(decode(hex("02 02 00 00 00 00 00 00 00 61 62"), WireGeneration::g0, tight).status ==
        DecodeStatus::complete);
}

TEST_CASE("generation detection needs the whole VALIDATE prefix", "[unit]") {
  const std::string validate = hex("00 ce f7 85 3c");
  for (std::size_t length = 0; length < validate.size(); ++length) {
    CHECK_FALSE(detect_generation(view(validate.substr(0, length)), WireGeneration::g0));
  }
  CHECK(detect_generation(view(validate), WireGeneration::g0) == WireGeneration::g2);
  CHECK(detect_generation(view(hex("00 03")), WireGeneration::g0) == WireGeneration::g0);
  CHECK(detect_generation(view(hex("06")), WireGeneration::g1) == WireGeneration::g1);
  CHECK(detect_generation(view(hex("00 ce f7 85 3d")), WireGeneration::g0) == WireGeneration::g0);
}

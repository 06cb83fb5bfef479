#pragma once
// ddprun-train's exact-resume record: where in training a snapshot was taken (epoch, steps into
// the next one, world size, seed) and the model's dimensions. It travels as a small JSON record
// beside data.pkl inside the snapshot's zip archive, where torch.load never looks, so the pickled
// dict stays exactly minGPT-ddp's three keys. Pure: encoding and validation, no files.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "model_dims.hpp"

namespace ddprun::train {

// The record's name inside the archive (torch.save's archives keep their records under one
// folder; the zip writer and reader add it).
inline constexpr std::string_view kResumeRecordName = "ddprun/resume_state.json";
// A real record is about 250 bytes; anything far larger is not one.
inline constexpr size_t kMaxResumeRecordBytes = 64 * 1024;

struct TrainingPosition {
  int64_t finished_epoch = 0;
  int64_t steps_into_epoch = 0;  // steps of epoch finished_epoch + 1 already taken
  int64_t world_size = 1;
  int64_t seed = 0;
  // The epoch order's cursor (distributed_sampler.hpp's step_share): where the next step takes
  // its samples, whatever the worlds before. -1: not recorded (a record of an older ddprun-train).
  int64_t samples_into_epoch = -1;
};

struct ResumeRecord {
  TrainingPosition position;
  ModelDims model;
};

class ResumeRecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string encode_resume_record(const ResumeRecord& record);

// Throws ResumeRecordError saying what is wrong (not JSON, a field missing, of the wrong type or
// out of range, an unknown format).
ResumeRecord decode_resume_record(std::string_view json);

}  // namespace ddprun::train

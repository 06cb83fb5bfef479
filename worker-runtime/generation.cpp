#include "generation.hpp"

#include <limits>

#include "mixed_precision.hpp"

namespace ddprun::train {

std::vector<int64_t> generate(GptImpl& model, const std::vector<int64_t>& prompt,
                              const GenerationOptions& options,
                              std::optional<at::ScalarType> autocast) {
  TORCH_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const auto device = model.parameters().front().device();
  const int64_t block = model.shape().block_size;
  auto generator = at::detail::createCPUGenerator(options.seed);
  auto context = torch::tensor(prompt, torch::kLong).unsqueeze(0).to(device);
  std::vector<int64_t> generated;
  generated.reserve(static_cast<size_t>(options.tokens));
  for (int64_t n = 0; n < options.tokens; ++n) {
    const int64_t length = context.size(1);
    const auto window = length <= block ? context : context.narrow(1, length - block, block);
    torch::Tensor logits;
    {
      const AutocastScope scope(device, autocast);
      logits = model.forward(window);
    }
    logits = logits.select(1, -1).to(torch::kFloat) / options.temperature;
    if (options.top_k > 0 && options.top_k < logits.size(-1)) {
      const auto kth = std::get<0>(logits.topk(options.top_k)).narrow(-1, options.top_k - 1, 1);
      logits.masked_fill_(logits < kth, -std::numeric_limits<float>::infinity());
    }
    const auto probabilities = torch::softmax(logits, -1);
    const auto next = options.greedy ? std::get<1>(probabilities.topk(1))
                                     : torch::multinomial(probabilities.cpu(), 1,
                                                          /*replacement=*/false, generator)
                                           .to(device);
    generated.push_back(next.item<int64_t>());
    context = torch::cat({context, next}, 1);
  }
  model.train(was_training);
  return generated;
}

}  // namespace ddprun::train

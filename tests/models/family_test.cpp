// The families beyond image classification: parameter counts are PyTorch's
// for the same architectures (bench/torchvision_reference.py prints them from
// bench/peer_models.py), multiply-accumulates follow the layer formulas, the
// synthetic tasks are what docs/models.md says, and flags a family does not
// take are refused naming it.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"
#include "libtorch/models/model.h"
#include "libtorch/models/seq2seq.h"
#include "models/recommendation.h"

namespace dlscale::models {
namespace {

int64_t params_of(const std::string& name, int64_t vocab = 0) {
  ModelOptions o;
  o.vocab = vocab;
  return count_parameters(*make_model(find_model(name), o));
}

TEST(Families, ParameterCountsArePyTorchs) {
  EXPECT_EQ(params_of("transformer"), 60917760);  // vocabulary 32,768
  EXPECT_EQ(params_of("transformer", 1000), 44652544);
  EXPECT_EQ(params_of("transformer-big", 1000), 177385472);
  EXPECT_EQ(params_of("ncf"), 31832577);
  EXPECT_EQ(params_of("gnmt"), 160671297);  // vocabulary 32,320, hidden 1,024
  EXPECT_EQ(params_of("gnmt", 1000), 96496617);
  // --hidden: the transformer's d_model, a feed-forward of 4x, heads of 64
  // (peer_models.Transformer(32, 64, 1, 256) and (1000, 128, 2, 512)).
  const auto transformer_of = [](int64_t vocab, int64_t hidden) {
    ModelOptions o;
    o.vocab = vocab;
    o.hidden = hidden;
    return count_parameters(*make_model(find_model("transformer"), resolve_options(find_model("transformer"), o)));
  };
  EXPECT_EQ(transformer_of(32, 64), 702720);
  EXPECT_EQ(transformer_of(1000, 128), 2905600);
}

// The units a sharded strategy gathers one at a time (libtorch/models/units.h): the
// ResNets' residual blocks and the Transformer's 6 + 6 layers, in forward
// order; every other parameter (the stem and classifier, the tied embedding)
// in none; a model that declares none has none.
TEST(Units, ResidualBlocksAndTransformerLayers) {
  for (const auto& [name, units] : std::vector<std::pair<std::string, size_t>>{
           {"resnet18", 8}, {"resnet50", 16}, {"transformer", 12}, {"lenet", 0}, {"tinycnn", 0}}) {
    SCOPED_TRACE(name);
    ModelOptions o;
    if (name == "transformer") o.vocab = 1000;
    const auto model = make_model(find_model(name), resolve_options(find_model(name), o));
    const std::vector<std::vector<size_t>> found = unit_parameters(*model);
    ASSERT_EQ(found.size(), units);
    const std::vector<torch::Tensor> params = model->parameters();
    std::vector<int> owners(params.size(), 0);
    for (size_t u = 0; u < found.size(); ++u) {
      ASSERT_FALSE(found[u].empty());
      if (u > 0) {
        EXPECT_GT(found[u].front(), found[u - 1].back()) << "forward order";
      }
      for (size_t k : found[u]) ++owners[k];
    }
    for (int n : owners) EXPECT_LE(n, 1);
    if (name == "transformer") {
      EXPECT_EQ(owners[0], 0) << "the tied embedding (the first parameter) belongs to no unit";
    }
  }
}

// Per sample at source = target length L, hidden h, vocabulary V: the LSTMs'
// 4h(in + h) a token and direction (encoder 16h² + 12h² + 2·8h², decoder
// 8h² + 3·12h²), the attention's two projections (2h²) and its score and
// context products (2·L·L·h), and the classifier (h·V).
TEST(Families, GnmtMacsFollowTheLayers) {
  const int64_t h = 32, len = 5, vocab = 64;
  ModelOptions o;
  o.vocab = vocab;
  o.seq_len = len;
  o.hidden = h;
  const ModelFacts f = describe_model(find_model("gnmt"), o);
  EXPECT_EQ(f.macs_per_sample, len * 90 * h * h + 2 * len * len * h + len * h * vocab);
  EXPECT_EQ(f.unit.name, "tokens");
  EXPECT_EQ(f.unit.items_per_sample, len);
  EXPECT_EQ(f.family, "rnn");
  EXPECT_EQ(input_text(f.inputs), "src 5, tgt_in 5");
  const auto model = make_model(find_model("gnmt"), resolve_options(find_model("gnmt"), o));
  model->eval();
  const Output out = model->forward({{kSourceTokens, torch::randint(kFirstWord, vocab, {3, len})},
                                     {kTargetIn, torch::randint(kBeginToken, vocab, {3, len})}});
  EXPECT_EQ(out.main.sizes(), (std::vector<int64_t>{3, len, vocab}));
}

// Per sample at source = target length L: every Fc's weight × rows, the two
// attention products (2·Lq·Lk·d) and the tied projection (L·d·V).
TEST(Families, TransformerMacsFollowTheLayers) {
  const int64_t d = 512, ff = 2048, layers = 6, vocab = 1000, len = 16;
  ModelOptions o;
  o.vocab = vocab;
  o.seq_len = len;
  const ModelFacts f = describe_model(find_model("transformer"), o);
  const int64_t attention_products = 2 * len * len * d;
  const int64_t ffn = 2 * d * ff * len;
  const int64_t encoder = 4 * d * d * len + attention_products + ffn;
  const int64_t decoder = 4 * d * d * len + attention_products + 4 * d * d * len + attention_products + ffn;
  EXPECT_EQ(f.macs_per_sample, layers * (encoder + decoder) + len * d * vocab);
  EXPECT_EQ(f.unit.name, "tokens");
  EXPECT_EQ(f.unit.items_per_sample, len);
  EXPECT_EQ(f.family, "transformer");
  EXPECT_EQ(input_text(f.inputs), "src 16, tgt_in 16");
}

TEST(Families, NcfMacsAreItsMlpAndNearlyAllParametersAreEmbeddings) {
  const ModelFacts f = describe_model(find_model("ncf"), {});
  EXPECT_EQ(f.macs_per_sample, 256 * 256 + 256 * 128 + 128 * 64 + 128);
  EXPECT_EQ(f.unit.name, "samples");
  const int64_t embeddings = (138493 + 26744) * (64 + 128);
  EXPECT_GT(static_cast<double>(embeddings) / static_cast<double>(f.parameters), 0.99);
  EXPECT_EQ(input_text(f.inputs), "user, item");
}

/// A translation model's options at `vocab` words and `seq_len` tokens, resolved.
ModelOptions translation_options(const ModelSpec& spec, int64_t vocab, int64_t seq_len) {
  ModelOptions o;
  o.vocab = vocab;
  o.seq_len = seq_len;
  return resolve_options(spec, o);
}

// Sample i: target = the vocabulary permutation of the source, reversed; the
// decoder reads it shifted right behind the begin token; the same (seed, i)
// gives the same sample.
TEST(Families, TranslationSamplesArePermutedAndReversed) {
  const ModelSpec& spec = find_model("transformer");
  const ModelOptions o = translation_options(spec, 50, 7);
  const data::SampleFn sample = spec.task->synthetic(spec, o, 11);
  torch::Tensor dictionary = torch::full({o.vocab}, -1, torch::kInt64);
  for (uint64_t i = 0; i < 40; ++i) {
    const data::Sample s = sample(i);
    const torch::Tensor src = s.inputs.at(kSourceTokens), tgt = s.targets.at(kTargetTokens);
    ASSERT_EQ(src.sizes(), (std::vector<int64_t>{7}));
    EXPECT_TRUE(s.inputs.at(kTargetIn).equal(shift_right(tgt)));
    EXPECT_EQ(s.inputs.at(kTargetIn)[0].item<int64_t>(), kBeginToken);
    EXPECT_GE(src.min().item<int64_t>(), kFirstWord);
    EXPECT_LT(src.max().item<int64_t>(), o.vocab);
    const torch::Tensor mapped = tgt.flip(0);
    for (int64_t k = 0; k < 7; ++k) {  // one word always maps to the same word
      const int64_t from = src[k].item<int64_t>(), to = mapped[k].item<int64_t>();
      if (dictionary[from].item<int64_t>() < 0) dictionary[from] = to;
      EXPECT_EQ(dictionary[from].item<int64_t>(), to);
    }
    EXPECT_TRUE(sample(i).inputs.at(kSourceTokens).equal(src));
  }
}

// --min-seq-len: each global batch of the training stream draws its length
// from [min, max]; every sample of a batch has it, the translation rule holds
// at any length, the task counts a batch's target tokens, and held-out
// samples keep the full length.
TEST(Families, TranslationBatchesDrawTheirOwnLengths) {
  const ModelSpec& spec = find_model("gnmt");
  ModelOptions o;
  o.vocab = 50;
  o.seq_len = 8;
  o.min_seq_len = 2;
  o = resolve_options(spec, o);
  const int64_t global_batch = 4;
  const data::SampleFn sample = spec.task->synthetic_stream(spec, o, 11, global_batch);
  std::set<int64_t> lengths;
  for (uint64_t batch = 0; batch < 20; ++batch) {
    const int64_t length = sample(batch * global_batch).targets.at(kTargetTokens).size(0);
    EXPECT_GE(length, 2);
    EXPECT_LE(length, 8);
    lengths.insert(length);
    std::vector<torch::Tensor> targets;
    for (uint64_t k = 0; k < global_batch; ++k) {
      const data::Sample s = sample(batch * global_batch + k);
      ASSERT_EQ(s.inputs.at(kSourceTokens).size(0), length);
      ASSERT_EQ(s.inputs.at(kTargetIn).size(0), length);
      EXPECT_TRUE(s.inputs.at(kTargetIn).equal(shift_right(s.targets.at(kTargetTokens))));
      targets.push_back(s.targets.at(kTargetTokens));
    }
    EXPECT_EQ(spec.task->items_in({{kTargetTokens, torch::stack(targets)}}), global_batch * length);
  }
  EXPECT_GE(lengths.size(), 4u) << "lengths vary from batch to batch";
  // The same word maps to the same word whatever the length.
  const data::SampleFn fixed = spec.task->synthetic(spec, o, 11);
  torch::Tensor dictionary = torch::full({o.vocab}, -1, torch::kInt64);
  for (uint64_t i = 0; i < 40; ++i) {
    for (const data::Sample& s : {sample(i), fixed(i)}) {
      const torch::Tensor src = s.inputs.at(kSourceTokens);
      const torch::Tensor mapped = s.targets.at(kTargetTokens).flip(0);
      for (int64_t k = 0; k < src.size(0); ++k) {
        const int64_t from = src[k].item<int64_t>(), to = mapped[k].item<int64_t>();
        if (dictionary[from].item<int64_t>() < 0) dictionary[from] = to;
        EXPECT_EQ(dictionary[from].item<int64_t>(), to);
      }
    }
    EXPECT_EQ(spec.task->synthetic_test(spec, o, 11)(i).targets.at(kTargetTokens).size(0), 8);
  }
  ModelOptions bad = o;
  bad.min_seq_len = 9;
  EXPECT_THROW(resolve_options(spec, bad), Error);
}

// --ambiguity P: each target word is its source word's first translation
// (the unambiguous task's) or, with probability P, its second, never the
// first; the draw is the sample's own (the same index gives the same sample)
// and the decoder reads the target it is given.
TEST(Families, AmbiguousTranslationsTakeTheSecondWordAtItsRate) {
  const ModelSpec& spec = find_model("transformer");
  const ModelOptions o = translation_options(spec, 40, 8);
  ModelOptions ambiguous = o;
  ambiguous.ambiguity = 0.25;
  const data::SampleFn plain = spec.task->synthetic(spec, o, 3);
  const data::SampleFn sample = spec.task->synthetic(spec, ambiguous, 3);
  std::map<int64_t, std::set<int64_t>> translations;
  int64_t words = 0, seconds = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    const data::Sample s = sample(i), p = plain(i);
    ASSERT_TRUE(s.inputs.at(kSourceTokens).equal(p.inputs.at(kSourceTokens))) << i;
    EXPECT_TRUE(s.inputs.at(kTargetIn).equal(shift_right(s.targets.at(kTargetTokens))));
    EXPECT_TRUE(sample(i).targets.at(kTargetTokens).equal(s.targets.at(kTargetTokens)));
    const torch::Tensor src = s.inputs.at(kSourceTokens);
    const torch::Tensor got = s.targets.at(kTargetTokens).flip(0),
                        first = p.targets.at(kTargetTokens).flip(0);
    for (int64_t k = 0; k < src.size(0); ++k) {
      const int64_t to = got[k].item<int64_t>();
      translations[src[k].item<int64_t>()].insert(to);
      ++words;
      seconds += to != first[k].item<int64_t>();
    }
  }
  for (const auto& [word, to] : translations) EXPECT_LE(to.size(), 2u) << "word " << word;
  EXPECT_EQ(translations.size(), 38u);
  // 4,000 draws of probability 0.25: 1,000 expected, sd 27.
  EXPECT_NEAR(static_cast<double>(seconds), 0.25 * static_cast<double>(words), 150);
  const torch::Tensor held_out =
      spec.task->synthetic_test(spec, ambiguous, 3)(0).targets.at(kTargetTokens);
  EXPECT_EQ(held_out.size(0), 8);
}

TEST(Families, RecommendationSamplesFollowThePlantedTaste) {
  const ModelSpec& spec = find_model("ncf");
  const data::SampleFn sample = spec.task->synthetic(spec, {}, 5);
  int positives = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    const data::Sample s = sample(i);
    const int64_t user = s.inputs.at(kUser).item<int64_t>(), item = s.inputs.at(kItem).item<int64_t>();
    const float clicked = s.targets.at(kClicked).item<float>();
    EXPECT_EQ(clicked, item % kTasteGroups == user % kTasteGroups ? 1.0F : 0.0F) << i;
    if (i % (kNegativesPerPositive + 1) == 0) {
      EXPECT_EQ(clicked, 1.0F) << i;
    }
    positives += clicked == 1.0F;
    EXPECT_LT(user, kSyntheticUsers);  // the synthetic stream's users and items (the tables are full size)
    EXPECT_LT(item, kSyntheticItems);
  }
  // 1 in 5 planted, plus 1 in 16 of the sampled negatives.
  EXPECT_NEAR(positives, 100 + 400 / 16, 20);
}

// HR@10: a hit when fewer than 10 candidates score above the positive (first).
TEST(Families, HitRateCountsCandidatesAboveThePositive) {
  const Task& task = *find_model("ncf").task;
  torch::Tensor scores = torch::arange(1000, torch::kFloat32).flip(0).repeat({3, 1});  // positive best
  scores[1][0] = 989.5;  // 9 candidates above (998 ... 990): a hit
  scores[2][0] = 988.5;  // 10 above: a miss
  EXPECT_EQ(task.evaluate({scores, {}}, {}), std::vector<double>{2});
  EXPECT_THROW(task.evaluate({torch::zeros({4}), {}}, {}), Error);
}

TEST(Families, NcfScoresCandidateLists) {
  const ModelSpec& spec = find_model("ncf");
  auto model = make_model(spec, {});
  model->eval();
  const Output out = model->forward({{kUser, torch::tensor({3, 4})}, {kItem, torch::randint(0, 26744, {2, 1000})}});
  EXPECT_EQ(out.main.sizes(), (std::vector<int64_t>{2, 1000}));
}

TEST(Families, FlagsAFamilyDoesNotTakeAreNamed) {
  const auto message = [](const std::string& name, ModelOptions o) {
    try {
      resolve_options(find_model(name), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  ModelOptions image;
  image.image_size = 32;
  EXPECT_EQ(message("ncf", image), "--image-size does not apply to model 'ncf' (family recommendation); it takes "
                                   "--sparse-embeddings and --dropout");
  ModelOptions sparse;
  sparse.sparse_embeddings = true;
  EXPECT_EQ(message("ncf", sparse), "accepted");
  EXPECT_EQ(message("gnmt", sparse),
            "--sparse-embeddings does not apply to model 'gnmt' (family rnn); it "
            "takes --vocab, --seq-len, --min-seq-len, --ambiguity, --hidden and --dropout");
  ModelOptions vocab;
  vocab.vocab = 100;
  EXPECT_EQ(message("resnet50", vocab), "--vocab does not apply to model 'resnet50' (family cnn); it takes "
                                        "--image-size, --classes and --dropout");
  ModelOptions classes;
  classes.num_classes = 10;
  EXPECT_EQ(message("transformer", classes),
            "--classes does not apply to model 'transformer' (family "
            "transformer); it takes --vocab, --seq-len, --min-seq-len, --ambiguity, --hidden and "
            "--dropout");
  ModelOptions aux;
  aux.aux_logits = true;
  EXPECT_EQ(message("resnet18", aux).substr(0, 42), "--aux-logits does not apply to model 'resn");
  ModelOptions tiny;
  tiny.vocab = 3;
  EXPECT_EQ(message("transformer", tiny), "--vocab must be >= 4 (got 3)");
  EXPECT_EQ(message("transformer", vocab), "accepted");
  ModelOptions hidden;
  hidden.hidden = 64;
  EXPECT_EQ(message("transformer", hidden), "accepted");
  EXPECT_EQ(message("resnet50", hidden), "--hidden does not apply to model 'resnet50' (family cnn); it takes "
                                         "--image-size, --classes and --dropout");
  EXPECT_EQ(message("gnmt", hidden), "accepted");
  ModelOptions ambiguous;
  ambiguous.ambiguity = 0.25;
  EXPECT_EQ(message("transformer", ambiguous), "accepted");
  EXPECT_EQ(message("resnet50", ambiguous).substr(0, 47),
            "--ambiguity does not apply to model 'resnet50' ");
  ambiguous.ambiguity = 0.5;
  EXPECT_EQ(
      message("gnmt", ambiguous),
      "--ambiguity must be in [0, 0.5): a word's first translation stays the likelier (got 0.5)");
  ambiguous.ambiguity = -0.1;
  EXPECT_EQ(message("transformer", ambiguous).substr(0, 29), "--ambiguity must be in [0, 0.");
  EXPECT_EQ(message("gnmt", image),
            "--image-size does not apply to model 'gnmt' (family rnn); it takes --vocab, "
            "--seq-len, --min-seq-len, --ambiguity, --hidden and --dropout");
}

}  // namespace
}  // namespace dlscale::models

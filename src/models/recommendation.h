#pragma once
// What the recommendation model (ncf) and its task (recommendation_task.cpp)
// share: tensor names and the synthetic task's planted structure.
#include <cstdint>

namespace dlscale::models {

inline constexpr const char* kUser = "user";    ///< [batch] user IDs
inline constexpr const char* kItem = "item";    ///< [batch] item IDs (training) or [batch, candidates] (evaluation)
inline constexpr const char* kClicked = "clicked";  ///< [batch] 1 for an interaction, 0 for none (float)

inline constexpr int64_t kNegativesPerPositive = 4;  ///< training samples: 1 positive, then 4 sampled negatives
inline constexpr int64_t kHitRank = 10;              ///< hit rate at 10
inline constexpr int64_t kEvalCandidates = 1000;     ///< an evaluation sample: 1 positive + 999 negatives

/// The synthetic task's planted taste: user u likes exactly the items of
/// its group, u mod groups (item i is in group i mod groups).
inline constexpr int64_t kTasteGroups = 16;
/// The synthetic stream's users and items are the first of these many IDs:
/// each is then seen often enough in a CPU-sized run to be learnt (and its
/// held-out samples ask about users and items the training saw, as MLPerf's
/// do). The tables keep their full sizes, so a step costs the same.
inline constexpr int64_t kSyntheticUsers = 512;
inline constexpr int64_t kSyntheticItems = 1024;

}  // namespace dlscale::models

// The planner policy (memory/residency_planner.h): its exact cost-to-go and its victims on
// hand-made sequences, against lookahead; the EvictionPolicy contract on random cases.
#include "memory/residency_planner.h"

#include <random>

#include "fake_loader.h"
#include "gtest/gtest.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {

// A known future given as a request sequence (NextUse derived from it).
class SequenceFuture final : public FutureReferences {
 public:
  void Set(uint64_t version, std::vector<FutureRequest> requests, size_t concurrent = 1) {
    auto seq = std::make_shared<FutureSequence>();
    seq->version = version;
    seq->concurrent = concurrent;
    seq->requests = std::move(requests);
    seq_ = std::move(seq);
  }
  uint64_t NextUse(const std::string& model) const override {
    for (size_t i = 0; i < seq_->requests.size(); ++i) {
      if (seq_->requests[i].model == model) return i;
    }
    return kNoFutureUse;
  }
  std::shared_ptr<const FutureSequence> Sequence() const override { return seq_; }

 private:
  std::shared_ptr<const FutureSequence> seq_ = std::make_shared<FutureSequence>();
};

std::vector<std::string> Names(const std::vector<EvictionCandidate>& c,
                               const std::vector<size_t>& victims) {
  std::vector<std::string> out;
  for (size_t i : victims) out.push_back(*c[i].name);
  return out;
}

TEST(PlanCostToGoTest, IsTheLeastBytesTheRestOfTheWindowUploads) {
  // Models a 50, b 40, c 40 (bits 0, 1, 2); steps c, b, a; 100 bytes for resident models.
  const std::vector<uint64_t> bytes{50, 40, 40};
  const std::vector<PlanStep> steps{{2, 40, 0, 40}, {1, 40, 0, 40}, {0, 50, 0, 50}};
  const std::vector<uint64_t> v = PlanCostToGo(bytes, steps, 100);
  EXPECT_EQ(v[0b101], 40u);  // {a, c}: b's turn needs 130 > 100: c goes, b is uploaded, a hits
  EXPECT_EQ(v[0b110], 50u);  // {b, c}: b hits; a is uploaded
  EXPECT_EQ(v[0b100], 90u);  // {c}: both uploaded
  EXPECT_EQ(v[0b111], 0u);   // everything there: c can go at b's turn
}

TEST(PlanCostToGoTest, WorkingSetsShrinkTheRoomAndStepsThatCannotFitAreSkipped) {
  const std::vector<uint64_t> bytes{60, 30};
  // a's second turn has a 50-byte working set: 60 + 30 + 50 > 120, so b must go (30 later);
  // the 200-byte stage in between cannot fit at all and changes nothing.
  const std::vector<PlanStep> steps{
      {0, 60, 0, 60}, {-1, 0, 200, 0}, {0, 60, 50, 60}, {1, 30, 0, 30}};
  EXPECT_EQ(PlanCostToGo(bytes, steps, 120)[0b11], 30u);
  EXPECT_EQ(PlanCostToGo(bytes, steps, 140)[0b11], 0u);
}

// Two jobs at once: a stage holds the model of the one beside it (no cost) and both working
// sets take room. Models a 50, b 40, c 30; base 130.
TEST(PlanCostToGoTest, AStageBesideAnotherHoldsItsModelAndItsWorkingSetToo) {
  const std::vector<uint64_t> bytes{50, 40, 30};
  // Alone: c, then b (a kept: 50 + 40 + 30 = 120 <= 130, nothing more to upload after b).
  const std::vector<PlanStep> alone{{2, 30, 0, 30}, {1, 40, 0, 40}, {0, 50, 0, 50}};
  EXPECT_EQ(PlanCostToGo(bytes, alone, 130)[0b101], 40u);
  // b runs beside c with c's 20-byte working set: a + b + c + 20 = 140 > 130, so a cannot stay
  // through b's turn and is uploaded again after it.
  const std::vector<PlanStep> beside{{2, 30, 20, 30}, {1, 40, 20, 40, 2}, {0, 50, 0, 50, 1}};
  EXPECT_EQ(PlanCostToGo(bytes, beside, 130)[0b101], 90u);
}

// Through Build: the sequence's `concurrent` decides whether a stage is planned beside the one
// before it. Admitting c (30, working 20) now with a (50) and b (40) resident, room 130, the
// rotation runs b (working 10) beside c, then a: planned alone, b is evicted (40 to upload
// later, a stays); beside c, a cannot stay through b's turn (50 + 40 + 30 + 30 > 130) and b
// is needed at once, so a goes.
TEST(PlannerTest, WithTwoJobsAtOnceTheStageBesideTakesRoomToo) {
  const std::string a = "a", b = "b", now = "c";
  const std::vector<EvictionCandidate> cand{{&a, 50, 1}, {&b, 40, 2}};
  for (size_t concurrent : {1, 2}) {
    SequenceFuture f;
    f.Set(1, {{"c", 30, 20, false}, {"b", 40, 10, false}, {"a", 50, 0, false}}, concurrent);
    PlannerPolicy planner;
    EXPECT_EQ(Names(cand, planner.ChooseVictimsWithRoom(cand, 30, &f, 130, &now)),
              std::vector<std::string>{concurrent == 1 ? "b" : "a"})
        << concurrent;
  }
}

TEST(PlannerTest, EvictsTheSmallerReloadWhereLookaheadEvictsTheFartherModel) {
  // b (40) and a (50) resident, c (40) about to be uploaded into 100 bytes; then b, then a.
  // lookahead weighs a's 50 bytes by its farther use and evicts it (a reload of 50); the
  // plan evicts b (a reload of 40), though b was used last.
  const std::string a = "a", b = "b";
  const std::vector<EvictionCandidate> c{{&b, 40, 2}, {&a, 50, 1}};
  SequenceFuture f;
  f.Set(1, {{"c", 40, 0, false}, {"b", 40, 0, false}, {"a", 50, 0, false}});
  auto planner = MakeEvictionPolicy("planner");
  auto lookahead = MakeEvictionPolicy("lookahead");
  ASSERT_TRUE(planner.ok() && lookahead.ok());
  EXPECT_EQ(Names(c, (*planner)->ChooseVictims(c, 30, &f)), std::vector<std::string>{"b"});
  EXPECT_EQ(Names(c, (*lookahead)->ChooseVictims(c, 30, &f)), std::vector<std::string>{"a"});
}

TEST(PlanCostToGoTest, APinnedStageCostsNothingButItsWorkingSetTakesRoom) {
  // a (60) resident; a pinned stage (model -1) with working set W; then a again. Room 120.
  const std::vector<uint64_t> bytes{60};
  auto with_working = [&](uint64_t w) {
    return PlanCostToGo(bytes, {{0, 60, 0, 60}, {-1, 0, w, 0}, {0, 60, 0, 60}}, 120)[0b1];
  };
  EXPECT_EQ(with_working(60), 0u);   // 60 + 60 fit: a stays
  EXPECT_EQ(with_working(70), 60u);  // a must make room and is uploaded again
}

TEST(PlannerTest, WithoutASequenceItIsLookahead) {
  class NextOnly final : public FutureReferences {
   public:
    uint64_t NextUse(const std::string& m) const override { return m == "swapper" ? 6 : 4; }
  } f;
  const std::string swapper = "swapper", detector = "detector";
  const std::vector<EvictionCandidate> c{{&swapper, 500, 1}, {&detector, 20, 2}};
  PlannerPolicy planner;
  EXPECT_EQ(Names(c, planner.ChooseVictims(c, 10, &f)), std::vector<std::string>{"detector"});
  EXPECT_EQ(planner.plans(), 0u);
}

TEST(PlannerTest, PlansOncePerVersionAndAgainWhenTheFutureChanges) {
  const std::string a = "a", b = "b";
  const std::vector<EvictionCandidate> c{{&a, 50, 1}, {&b, 40, 2}};
  SequenceFuture f;
  f.Set(7, {{"c", 40, 0, false}, {"a", 50, 0, false}});
  PlannerPolicy planner;
  EXPECT_EQ(Names(c, planner.ChooseVictims(c, 30, &f)), std::vector<std::string>{"b"});
  EXPECT_EQ(Names(c, planner.ChooseVictims(c, 30, &f)), std::vector<std::string>{"b"});
  EXPECT_EQ(planner.plans(), 1u);
  f.Set(8, {{"c", 40, 0, false}, {"b", 40, 0, false}});  // now b is the one needed
  EXPECT_EQ(Names(c, planner.ChooseVictims(c, 30, &f)), std::vector<std::string>{"a"});
  EXPECT_EQ(planner.plans(), 2u);
}

TEST(PlannerTest, APreparedPlanIsReadNotRecomputed) {
  const std::string a = "a", b = "b";
  const std::vector<EvictionCandidate> c{{&b, 40, 2}, {&a, 50, 1}};
  SequenceFuture f;
  f.Set(1, {{"c", 40, 0, false}, {"b", 40, 0, false}, {"a", 50, 0, false}}, /*concurrent=*/2);
  PlannerPolicy planner;
  planner.Prepare(f, 100, {"a", "b"});
  // Two jobs at once: b runs beside c (80 bytes) and a beside b (90), so keeping b and evicting
  // a (50 to upload) beats keeping a (b's turn beside c has no room for a: 40 + 50 again).
  EXPECT_EQ(planner.plans(), 2u);  // c admitted now, or b (two jobs run: either stage is next)
  const std::string now = "c";
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, &now)), std::vector<std::string>{"a"});
  EXPECT_EQ(planner.plans(), 2u);
  EXPECT_EQ(planner.inline_plans(), 0u);
  // Another room (the budget changed) is another plan, made inline.
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 90, &now)), std::vector<std::string>{"a"});
  EXPECT_EQ(planner.inline_plans(), 1u);
  // So is a model admitted that the prepared fronts do not name (d: not in the sequence).
  const std::string other = "d";
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, &other)), std::vector<std::string>{"a"});
  EXPECT_EQ(planner.inline_plans(), 2u);
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, &other)), std::vector<std::string>{"a"});
  EXPECT_EQ(planner.inline_plans(), 2u);  // kept for the rest of this version
}

// Two jobs run: the forecast's first request is job A's next stage (a), but the stage admitted
// now is job B's (c, the forecast's second). Planned as if requests[0] were the one admitted,
// a would count as served and be evicted, and job A would upload it again at once; planned
// from c, a is still to come: evicting b costs 40 bytes later, evicting a 50.
TEST(PlannerTest, PlansFromTheModelBeingAdmittedNotTheForecastsFirstRequest) {
  const std::string a = "a", b = "b", now = "c";
  const std::vector<EvictionCandidate> c{{&a, 50, 1}, {&b, 40, 2}};
  SequenceFuture f;
  f.Set(1, {{"a", 50, 0, false}, {"c", 40, 0, false}, {"b", 40, 0, false}});
  PlannerPolicy planner;
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, &now)), std::vector<std::string>{"b"});
  // Unnamed, requests[0] is the stage admitted: then a counts as served.
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, nullptr)), std::vector<std::string>{"a"});
  // Admitting a model the forecast does not name: every request is still to come.
  const std::string other = "d";
  EXPECT_EQ(Names(c, planner.ChooseVictimsWithRoom(c, 30, &f, 100, &other)), std::vector<std::string>{"b"});
}

TEST(PlannerTest, ThroughTheManagerPinsStayAndThePlannedVictimGoes) {
  // Budget 150 with p (50) pinned: room 100 for a (50), b (40) and c (40), as in the case above.
  testing::FakeLoader loader;
  SequenceFuture f;
  auto m = ResidencyManager::Create(
      {.device_budget_bytes = 150, .policy = "planner", .loader = &loader, .future = &f});
  ASSERT_TRUE(m.ok());
  for (auto [n, bytes] : {std::pair{"p", 50}, {"a", 50}, {"b", 40}, {"c", 40}}) {
    loader.SetBytes(n, bytes);
    ASSERT_TRUE((*m)->RegisterModel({n, static_cast<uint64_t>(bytes)}).ok());
  }
  ASSERT_TRUE((*m)->Pin("p", absl::Now()).ok());
  const Owner job{"j", 1};
  for (const char* n : {"a", "b"}) ASSERT_TRUE((*m)->Acquire(job, n, 0, absl::Now()).ok());
  f.Set(1, {{"c", 40, 0, false}, {"b", 40, 0, false}, {"a", 50, 0, false}});
  (*m)->PrepareEviction();
  loader.ClearLog();
  ASSERT_TRUE((*m)->Acquire(job, "c", 0, absl::Now()).ok());
  EXPECT_EQ(loader.log().front(), "release_device b");
  for (const ModelSnapshot& s : (*m)->Snapshot().models) {
    if (s.name == "p") {
      EXPECT_EQ(s.state, ModelState::kDevice);
    }
  }
}

TEST(PlannerTest, ModelsOfUnknownSizeTakeTheSizeLastSeenAsACandidate) {
  // The daemon's queue knows model names only (bytes 0). After a and b were candidates once,
  // their sizes are known to the plan: the same choice as with sizes given (not knowing them,
  // every choice would tie and the most recently used, b, would stay).
  const std::string a = "a", b = "b";
  const std::vector<EvictionCandidate> c{{&b, 40, 2}, {&a, 50, 1}};
  SequenceFuture f;
  f.Set(1, {{"c", 40, 0, false}, {"b", 0, 0, false}, {"a", 0, 0, false}});
  PlannerPolicy planner;
  EXPECT_EQ(Names(c, planner.ChooseVictims(c, 30, &f)), std::vector<std::string>{"b"});
}

TEST(PlannerTest, VictimsAreCandidatesThatFreeWhatIsAsked) {
  std::mt19937 rng(3);
  PlannerPolicy planner;
  SequenceFuture f;
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i) names.push_back("m" + std::to_string(i));
  for (uint64_t round = 0; round < 300; ++round) {
    std::vector<EvictionCandidate> c;
    uint64_t total = 0;
    for (int i = 0; i < 16; ++i) {
      if (rng() % 2 == 0) continue;
      c.push_back({&names[i], 10 + rng() % 600, rng() % 100});
      total += c.back().bytes;
    }
    std::vector<FutureRequest> seq;
    for (int k = 0; k < 40; ++k) {
      const int m = static_cast<int>(rng() % 16);
      seq.push_back({names[m], 10 + static_cast<uint64_t>(m) * 37, rng() % 200, rng() % 10 == 0});
    }
    f.Set(round, seq);
    const uint64_t need = 1 + rng() % (total + 100);
    std::vector<size_t> v = planner.ChooseVictims(c, need, &f);
    std::vector<bool> seen(c.size(), false);
    uint64_t freed = 0;
    for (size_t i : v) {
      ASSERT_LT(i, c.size());
      ASSERT_FALSE(seen[i]) << "victim twice";
      seen[i] = true;
      freed += c[i].bytes;
    }
    if (total >= need) {
      EXPECT_GE(freed, need) << "round " << round;
    } else {
      EXPECT_EQ(v.size(), c.size());
    }
  }
}

}  // namespace
}  // namespace fusion

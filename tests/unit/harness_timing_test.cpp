#include <gtest/gtest.h>

#include "harness/engine/timing.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

// Returns scripted sample times and counts calls: the loop logic without a clock.
class ScriptedTimer final : public Timer {
 public:
  explicit ScriptedTimer(std::vector<double> script) : script_(std::move(script)) {}
  std::string name() const override { return "scripted"; }
  void warm(const std::function<void()>& fn) override {
    ++warms;
    fn();
  }
  double sample(const std::function<void()>& fn, const std::string&) override {
    fn();
    return script_[samples++ % script_.size()];
  }
  int warms = 0, samples = 0;

 private:
  std::vector<double> script_;
};

TEST(HarnessTiming, QuietSamplesStopAtMinSamplesOnNoise) {
  ScriptedTimer t({1.0});
  int calls = 0;
  TimingPolicy p;
  p.warmup = 2;
  p.min_samples = 10;
  const Measurement m = measure(t, [&] { ++calls; }, p);
  EXPECT_EQ(m.times_ms.size(), 10u);
  EXPECT_EQ(m.stop_reason, "noise");
  EXPECT_EQ(t.warms, 2);
  EXPECT_EQ(calls, 12);  // warm-up + samples, nothing else
  EXPECT_DOUBLE_EQ(m.noise, 0);
}

TEST(HarnessTiming, NoisySamplesStopAtMaxSamples) {
  ScriptedTimer t({1.0, 2.0});
  TimingPolicy p;
  p.min_samples = 10;
  p.max_samples = 25;
  p.time_budget_s = 1e9;
  const Measurement m = measure(t, [] {}, p);
  EXPECT_EQ(m.times_ms.size(), 25u);
  EXPECT_EQ(m.stop_reason, "max_samples");
  EXPECT_GT(m.noise, 0.3);
}

TEST(HarnessTiming, NoisySamplesStopAtBudgetButNotBeforeMinSamples) {
  ScriptedTimer t({1.0, 3.0});
  TimingPolicy p;
  p.min_samples = 7;
  p.time_budget_s = 0;
  const Measurement m = measure(t, [] {}, p);
  EXPECT_EQ(m.times_ms.size(), 7u);
  EXPECT_EQ(m.stop_reason, "time_budget");
}

TEST(HarnessTiming, ResetRunsBeforeEveryCall) {
  // The call mutates `state`; the reset restores it, so every call, warm-up or timed, starts from 0.
  ScriptedTimer t({1.0});
  int state = 0, resets = 0, dirty_calls = 0;
  TimingPolicy p;
  p.warmup = 2;
  p.min_samples = 4;
  p.max_samples = 4;
  const Measurement m = measure(
      t, [&] { dirty_calls += state != 0; ++state; }, p, "", [&] { ++resets; state = 0; });
  EXPECT_EQ(m.times_ms.size(), 4u);
  EXPECT_EQ(resets, 2 + 4);
  EXPECT_EQ(dirty_calls, 0);
}

TEST(HarnessTiming, BadPolicyIsRefused) {
  ScriptedTimer t({1.0});
  TimingPolicy p;
  p.min_samples = 0;
  EXPECT_THROW(measure(t, [] {}, p), Error);
  p.min_samples = 5;
  p.max_samples = 4;
  EXPECT_THROW(measure(t, [] {}, p), Error);
}

TEST(HarnessTiming, CpuTimerMeasuresElapsedTime) {
  auto t = make_cpu_timer();
  volatile double sink = 0;
  const double ms = t->sample([&] { for (int i = 0; i < 200000; ++i) sink = sink + i; }, "lina:timed:test");
  EXPECT_GT(ms, 0);
  EXPECT_EQ(t->name(), "cpu-steady-clock");
}

TEST(HarnessTiming, ThrottleFlag) {
  ClockReading r;
  EXPECT_FALSE(throttled(r));  // no NVML: nothing to flag
  r.sm_mhz = 1980;
  r.max_sm_mhz = 1980;
  r.throttle_reasons = 0x1;  // GPU idle is not a slowdown
  EXPECT_FALSE(throttled(r));
  r.sm_mhz = 1500;
  EXPECT_TRUE(throttled(r));
  r.sm_mhz = 1980;
  r.throttle_reasons = 0x20;  // SW thermal slowdown
  EXPECT_TRUE(throttled(r));
}

}  // namespace
}  // namespace lina::harness

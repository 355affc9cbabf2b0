// Rule 8 of policy.h: why a job waits or can never run (policy_reasons.h),
// and the public WaitingJob::Reason, WaitKind and WaitEventDue.
// ShapeProblem runs for every new shape: [[gnu::hot]], as in policy_place.cc.
#include "scheduler/policy_reasons.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace stoker::scheduler {
namespace internal {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Gb(double bytes) { return Num(std::round(bytes / kGiB * 100) / 100) + " GB"; }

// RFC 3339 UTC, second precision: "2026-11-22T10:00:00Z".
std::string FormatTime(int64_t us) {
  std::time_t s = static_cast<std::time_t>(us / kUsPerS);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The most unbooked GPUs of `types` on any one node, and the most room
// (1 - booked fraction, at least 0) on any one GPU of `types`. Read from the
// node sets: a free GPU has all the room there is, and only nodes with a
// free or partly booked GPU of the types matter.
std::pair<int, double> MostFree(const Cluster& c, const State& s, IdSpan types) {
  const size_t words = s.with_free.words();
  auto any_type = [&](const NodeSets& sets) {
    return [&sets, types](size_t w) {
      uint64_t bits = 0;
      for (int t : types) bits |= sets.Word(static_cast<size_t>(t), w);
      return bits;
    };
  };
  int most = 0;
  if (types.last - types.first == 1) {
    const int t = *types.begin();
    for (int k = c.max_per_type; k > 0 && most == 0; --k) {
      for (size_t w = 0; w < words && most == 0; ++w) {
        if (s.by_free.Word(c.FreeSet(t, k), w) != 0) most = k;
      }
    }
  } else {
    ForEachNode(words, any_type(s.with_free), [&](int n) {
      int a = 0;
      for (int t : types) a += s.node_free[s.nodes[n].type_base + t];
      most = std::max(most, a);
      return false;
    });
  }
  if (most > 0) return {most, 1.0};
  double room = 0;
  ForEachNode(words, any_type(s.with_partial), [&](int n) {
    for (int t : types) {
      for (int p : c.Positions(n, t)) room = std::max(room, 1 - s.frac[s.nodes[n].gpu_base + p]);
    }
    return false;
  });
  return {0, room};
}

// "a, b, c, d, e and 3 more": at most five ids.
std::string JobList(const std::vector<std::string>& ids) {
  std::string r;
  size_t shown = std::min<size_t>(ids.size(), 5);
  for (size_t i = 0; i < shown; ++i) r += (i ? ", " : "") + ids[i];
  if (ids.size() > shown) r += " and " + std::to_string(ids.size() - shown) + " more";
  return r;
}

}  // namespace

[[gnu::hot]] std::string ShapeProblem(const std::vector<ReplicaAsk>& replicas) {
  if (replicas.empty()) return "has no replicas";
  for (size_t i = 0; i < replicas.size(); ++i) {
    const ReplicaAsk& r = replicas[i];
    auto at = [i] { return "replicas[" + std::to_string(i) + "]"; };
    if (!(r.gpus >= 0) || !std::isfinite(r.gpus)) {
      return at() + ".gpus is " + Num(r.gpus) + "; use 0 or more";
    }
    if (r.gpus > 1 && r.gpus != std::floor(r.gpus)) {
      return at() + ".gpus is " + Num(r.gpus) + "; counts above 1 must be whole numbers (ask for " +
             Num(std::floor(r.gpus)) + " or " + Num(std::ceil(r.gpus)) +
             ", or a fraction below 1 to share one GPU)";
    }
    if (r.gpus > 0 && r.gpu_type.empty()) return at() + ".gpu_type is empty; name the GPU type";
    if (!(r.cpus >= 0) || !std::isfinite(r.cpus)) {
      return at() + ".cpus is " + Num(r.cpus) + "; use 0 or more";
    }
  }
  return "";
}

std::string Diagnose(const Cluster& c, const State& s, const Shape& shape, const PolicyOptions& o,
                     Summary& sum) {
  const bool subs = o.accelerator_substitution;
  for (const auto& [sv, count] : shape.whole_by_type) {
    int free = FreeServing(s, *sv, subs);
    if (free < count) {
      std::string r = "needs " + std::to_string(count) + "x " + sv->type;
      if (shape.replicas > 1) {
        int per = 0, reps = 0;
        for (const Need& n : shape.needs) {
          if (n.serving == sv && n.whole > 0) per = n.whole, ++reps;
        }
        if (reps > 1 && per * reps == count) {
          r += " (" + std::to_string(reps) + " replicas x " + std::to_string(per) + ")";
        }
      }
      r += ", " + std::to_string(free) + " free";
      if (subs && !sv->subs.empty()) r += " counting substitutes";
      return r;
    }
  }
  for (const Need& n : shape.needs) {
    if (n.whole == 0 && n.frac == 0) continue;
    auto [it, fresh] = sum.gpus.try_emplace(n.serving);
    if (fresh) it->second = MostFree(c, s, Allowed(n, subs ? 1 : 0));
    auto [most, room] = it->second;
    if (n.whole > most) {
      return "needs " + std::to_string(n.whole) + "x " + n.serving->type +
             " on one node, at most " + std::to_string(most) + " free on any node";
    }
    if (n.frac > 0 && n.frac > room + kEps) {
      return "needs " + Num(n.frac) + " of a " + n.serving->type + ", no such GPU has " +
             Num(n.frac) + " free";
    }
  }
  if (!sum.cpu_done) {
    sum.cpu_done = true;
    for (const NodeState& ns : s.nodes) {
      sum.most_cpu = std::max(sum.most_cpu, ns.cpu_cap - ns.cpu_used);
      sum.most_mem = std::max(sum.most_mem, ns.mem_cap - ns.mem_used);
    }
  }
  for (const Need& n : shape.needs) {
    if (n.cpus > sum.most_cpu + kEps) {
      return "needs " + Num(n.cpus) + " CPUs on one node, at most " +
             Num(std::max(0.0, sum.most_cpu)) + " free on any node";
    }
    if (n.mem > sum.most_mem + 1) {
      return "needs " + Gb(n.mem) + " memory on one node, at most " +
             Gb(std::max(0.0, sum.most_mem)) + " free on any node";
    }
  }
  return "needs " + std::to_string(shape.replicas) +
         " replicas placed together; free GPUs, CPUs and memory are not on the same nodes";
}

std::string NeverFitsProblem(const Cluster& c, const State& idle, const Shape& shape,
                             const PolicyOptions& o) {
  Summary sum;
  return "can never run on this cluster even when idle: " + Diagnose(c, idle, shape, o, sum) +
         " (ask for less, allow accelerator substitution, or add nodes)";
}

std::string ReservationText(const Reservation& r, std::optional<int64_t> expected_us) {
  std::string after;
  if (!r.after_jobs.empty()) {
    after = " after job" + std::string(r.after_jobs.size() > 1 ? "s " : " ") +
            JobList(r.after_jobs) + (r.after_jobs.size() > 1 ? " end" : " ends");
  }
  if (!expected_us) {
    if (r.start_us == 0) return "start unknown: it waits on running jobs with no runtime bound";
    return "starts at " + FormatTime(r.start_us) + after;
  }
  std::string s = *expected_us == 0 ? "start unknown (no job like those ahead has ended yet)"
                                    : "expected to start at " + FormatTime(*expected_us) + after;
  if (r.start_us != 0 && r.start_us != *expected_us) {
    s += "; at the latest at " + FormatTime(r.start_us) + ", their time limits";
  }
  return s;
}

void AppendJobsAhead(std::string& out, int ahead) {
  if (ahead == 0) return;
  out += "; ";
  out += std::to_string(ahead);
  out += ahead == 1 ? " job ahead in the queue" : " jobs ahead in the queue";
}

std::string QuotaJobsReason(const std::string& user, int jobs, int max_jobs) {
  return "quota: user " + user + " already runs " + std::to_string(jobs) + " of " +
         std::to_string(max_jobs) + " allowed jobs";
}

std::string QuotaGpusReason(const std::string& user, double gpus, double max_gpus, double needs) {
  return "quota: user " + user + " uses " + Num(gpus) + " of " + Num(max_gpus) +
         " allowed GPUs; this job needs " + Num(needs);
}

std::string ReservedReason(std::string diagnosis, const std::string& reserved) {
  diagnosis += "; reserved: ";
  diagnosis += reserved;
  return diagnosis;
}

std::string ResourcesReason(std::string diagnosis, int ahead) {
  AppendJobsAhead(diagnosis, ahead);
  return diagnosis;
}

std::string BackfillOffReason(const std::string& holder, int ahead) {
  std::string why = "waits for job " + holder + " (first in line";
  if (ahead > 1) AppendJobsAhead(why, ahead);
  return why + "); backfill is off";
}

std::string WouldDelayReason(const std::string& holder, const std::string& reserved) {
  return "reserved for job " + holder + ": " + reserved + "; backfill would delay it";
}

}  // namespace internal

std::string WaitingJob::Reason() const {
  if (!detail.empty()) return detail;
  return std::to_string(jobs_ahead) +
         (jobs_ahead == 1 ? " job ahead in the queue" : " jobs ahead in the queue");
}

std::string WaitKind(const WaitingJob& w) {
  if (w.detail.empty()) return "place in line";
  std::string kind = w.detail.substr(0, w.detail.find("; "));
  std::erase_if(kind, [](char c) { return c >= '0' && c <= '9'; });
  return kind;
}

bool WaitEventDue(const WaitingJob& w, const std::string& last_kind, int64_t last_event_us,
                  int64_t now_us, int64_t repeat_us) {
  std::string kind = WaitKind(w);
  if (kind != last_kind) return true;
  return !w.detail.empty() && now_us - last_event_us >= repeat_us;
}

}  // namespace stoker::scheduler

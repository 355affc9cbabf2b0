// stoker-bench: submit-to-start latency and durable submission throughput of
// stokerd, and the same two measurements of Slurm's sbatch, with one
// methodology. See bench/README.md.
//
//   stoker-bench start-latency --server URL --data-dir DIR [--jobs 200] [--trainer-clock]
//   stoker-bench submit-rate   --server URL [--jobs 5000] [--clients 8] [--gpu-queue]
//   stoker-bench sbatch-latency --work-dir DIR [--jobs 200]
//   stoker-bench sbatch-rate    [--jobs 1000] [--clients 8]
//   every mode: [--out FILE.json] writes the numbers for bench/run.sh
//
// All times are CLOCK_REALTIME microseconds, the clock stoker-run stamps
// trainer.json with and the one `date +%s%6N` prints, so client- and
// server-side stamps compare directly on one machine.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kUsage[] =
    "usage: stoker-bench MODE [flags]\n"
    "  start-latency  --server URL --data-dir DIR [--jobs 200] [--trainer-clock] [--image URI]\n"
    "  submit-rate    --server URL [--jobs 5000] [--clients 8] [--gpu-queue]\n"
    "  sbatch-latency --work-dir DIR [--jobs 200]\n"
    "  sbatch-rate    [--jobs 1000] [--clients 8]\n"
    "common: [--project p] [--location l] [--out FILE.json] [--timeout-s 30]\n";

int64_t NowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

void SleepUs(int64_t us) {
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>((us % 1'000'000) * 1000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "stoker-bench: " << what << "\n";
  std::exit(1);
}

struct Flags {
  std::string mode;
  std::string server;
  std::string data_dir;
  std::string work_dir;
  std::string out;
  std::string project = "p";
  std::string location = "l";
  int jobs = -1;
  int clients = 8;
  int timeout_s = 30;
  bool trainer_clock = false;
  bool gpu_queue = false;
  std::string image = "bench/trivial";  // start-latency: the job's imageUri
};

Flags ParseFlags(int argc, char** argv) {
  if (argc < 2) Die(std::string("no mode given\n") + kUsage);
  Flags f;
  f.mode = argv[1];
  if (f.mode == "-h" || f.mode == "--help") {
    std::cout << kUsage;
    std::exit(0);
  }
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) Die(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto integer = [&](int& i) {
    std::string flag = argv[i];
    std::string v = value(i);
    char* end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    if (*end || n <= 0) Die(flag + ": expected a positive integer, got '" + v + "'");
    return static_cast<int>(n);
  };
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--server")
      f.server = value(i);
    else if (a == "--data-dir")
      f.data_dir = value(i);
    else if (a == "--work-dir")
      f.work_dir = value(i);
    else if (a == "--out")
      f.out = value(i);
    else if (a == "--project")
      f.project = value(i);
    else if (a == "--location")
      f.location = value(i);
    else if (a == "--jobs")
      f.jobs = integer(i);
    else if (a == "--clients")
      f.clients = integer(i);
    else if (a == "--timeout-s")
      f.timeout_s = integer(i);
    else if (a == "--trainer-clock")
      f.trainer_clock = true;
    else if (a == "--gpu-queue")
      f.gpu_queue = true;
    else if (a == "--image")
      f.image = value(i);
    else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else
      Die("unknown flag '" + a + "'\n" + kUsage);
  }
  while (!f.server.empty() && f.server.back() == '/') f.server.pop_back();
  return f;
}

// ---- statistics -------------------------------------------------------------

// Nearest-rank percentile of a sample, in the sample's unit.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// {n, min, p50, p90, p99, max, mean} in milliseconds of a sample in µs.
json Summary(const std::vector<double>& us) {
  if (us.empty()) return json{{"n", 0}};
  double sum = 0;
  for (double x : us) sum += x;
  auto ms = [](double x) { return std::round(x / 10.0) / 100.0; };  // 0.01 ms resolution
  return {{"n", us.size()},
          {"min_ms", ms(*std::min_element(us.begin(), us.end()))},
          {"p50_ms", ms(Percentile(us, 50))},
          {"p90_ms", ms(Percentile(us, 90))},
          {"p99_ms", ms(Percentile(us, 99))},
          {"max_ms", ms(*std::max_element(us.begin(), us.end()))},
          {"mean_ms", ms(sum / us.size())}};
}

void PrintSummary(const std::string& label, const json& s) {
  if (s.value("n", 0) == 0) {
    std::printf("  %-34s (no samples)\n", label.c_str());
    return;
  }
  std::printf("  %-34s p50 %8.2f  p90 %8.2f  p99 %8.2f  max %8.2f  min %8.2f ms (n=%d)\n",
              label.c_str(), s["p50_ms"].get<double>(), s["p90_ms"].get<double>(),
              s["p99_ms"].get<double>(), s["max_ms"].get<double>(), s["min_ms"].get<double>(),
              s["n"].get<int>());
}

void WriteOut(const Flags& f, const json& result) {
  if (f.out.empty()) return;
  std::ofstream out(f.out);
  out << result.dump(2) << "\n";
  if (!out) Die("cannot write " + f.out);
}

// Completions per second between two ranks of sorted completion stamps.
double RateBetween(const std::vector<int64_t>& done, size_t a, size_t b) {
  if (b <= a || b >= done.size() || done[b] == done[a]) return NAN;
  return (b - a) / ((done[b] - done[a]) / 1e6);
}

// Sustained = the middle 80% of completions, free of ramp-up and tail; the
// first and last fifths show whether the rate falls as the queue grows.
struct RateWindows {
  double middle = NAN, first = NAN, last = NAN;
};
RateWindows Rates(const std::vector<int64_t>& done) {
  RateWindows r;
  size_t n = done.size();
  if (n < 20) return r;
  r.middle = RateBetween(done, n / 10, n - n / 10 - 1);
  r.first = RateBetween(done, 0, n / 5);
  r.last = RateBetween(done, n - n / 5 - 1, n - 1);
  return r;
}

// ---- small file helpers -----------------------------------------------------

std::optional<std::string> ReadWhole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<json> ReadJsonFile(const fs::path& p) {
  auto text = ReadWhole(p);
  if (!text) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// A file holding one `date +%s%6N` line; nullopt until the whole line is there.
std::optional<int64_t> ReadStampFile(const fs::path& p) {
  auto text = ReadWhole(p);
  if (!text || text->empty() || text->back() != '\n') return std::nullopt;
  return std::atoll(text->c_str());
}

// Modification time of a file in µs, or 0.
int64_t MtimeUs(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return 0;
  return int64_t{st.st_mtim.tv_sec} * 1'000'000 + st.st_mtim.tv_nsec / 1000;
}

// "2026-11-22T02:54:17.708517Z" -> µs since the epoch, or 0.
int64_t ParseRfc3339(const std::string& s) {
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return 0;
  int64_t us = int64_t{timegm(&tm)} * 1'000'000;
  if (*rest == '.') {
    ++rest;
    int64_t frac = 0;
    int digits = 0;
    for (; *rest >= '0' && *rest <= '9'; ++rest, ++digits) {
      if (digits < 6) frac = frac * 10 + (*rest - '0');
    }
    for (; digits < 6; ++digits) frac *= 10;
    us += frac;
  }
  return us;
}

// Polls `probe` about every `interval_us` until it yields a value or
// `timeout_s` passes.
template <typename F>
auto PollFor(F probe, int timeout_s, int64_t interval_us = 1000) -> decltype(probe()) {
  int64_t deadline = NowUs() + int64_t{timeout_s} * 1'000'000;
  while (true) {
    auto v = probe();
    if (v || NowUs() > deadline) return v;
    SleepUs(interval_us);
  }
}

// ---- Stoker -----------------------------------------------------------------

std::string JobBody(const std::vector<std::string>& command, bool gpu,
                    const std::string& image = "bench/trivial") {
  json machine = {{"machineType", "e2-standard-2"}};
  if (gpu) {
    machine["acceleratorType"] = "NVIDIA_TESLA_T4";
    machine["acceleratorCount"] = 1;
  }
  json body = {{"displayName", "bench"},
               {"jobSpec",
                {{"workerPoolSpecs",
                  {{{"machineSpec", machine},
                    {"replicaCount", 1},
                    {"containerSpec", {{"imageUri", image}, {"command", command}}}}}}}}};
  return body.dump();
}

std::string JobsPath(const Flags& f) {
  return "/v1/projects/" + f.project + "/locations/" + f.location + "/customJobs";
}

// `extra` plus "authorization: Bearer $STOKER_TOKEN" when that is set (a
// daemon's local admin token is in <data dir>/token).
std::map<std::string, std::string> WithAuth(std::map<std::string, std::string> extra = {}) {
  const char* token = std::getenv("STOKER_TOKEN");
  if (token && *token) extra["authorization"] = std::string("Bearer ") + token;
  return extra;
}

// The job id at the end of the response's "name", or "" (with `error` set).
std::string SubmitOnce(stoker::http::Client& client, const std::string& path,
                       const std::string& body, std::string* error, json* response = nullptr) {
  auto r = client.Call("POST", path, body, WithAuth({{"content-type", "application/json"}}));
  if (!r.ok()) {
    *error = r.status().ToString();
    return "";
  }
  if (r->status != 200) {
    *error = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
    return "";
  }
  json j = json::parse(r->body, nullptr, false);
  std::string name = j.is_object() ? j.value("name", "") : "";
  size_t slash = name.rfind('/');
  if (slash == std::string::npos) {
    *error = "response without a job name: " + r->body.substr(0, 300);
    return "";
  }
  if (response) *response = std::move(j);
  return name.substr(slash + 1);
}

int StartLatency(const Flags& f) {
  if (f.server.empty() || f.data_dir.empty()) Die("start-latency needs --server and --data-dir");
  int jobs = f.jobs > 0 ? f.jobs : 200;
  stoker::http::Client client(f.server);
  const std::string path = JobsPath(f);
  std::vector<std::string> command = {"/bin/true"};
  // Into the replica's work/: the trainer's working directory and HOME (a
  // container runs in its image's WORKDIR, with HOME the replica's work/).
  if (f.trainer_clock) command = {"/bin/sh", "-c", "cd \"$HOME\" && date +%s%6N > started"};
  const std::string body = JobBody(command, false, f.image);

  // Per job: client stamps, server stamps, and phase boundaries seen on disk.
  std::vector<double> rtt, sup_lat, tr_lat, ph_queue, ph_spawn, ph_fork, ph_exec, ph_create,
      create_to_fork;
  int failures = 0;
  std::string first_error;
  for (int i = 0; i < jobs; ++i) {
    std::string error;
    json resp;
    int64_t t_send = NowUs();
    std::string id = SubmitOnce(client, path, body, &error, &resp);
    int64_t t_submit = NowUs();
    if (id.empty()) {
      if (first_error.empty()) first_error = error;
      ++failures;
      continue;
    }
    rtt.push_back(t_submit - t_send);
    fs::path dir = fs::path(f.data_dir) / "jobs" / id / "workerpool0-0";
    auto trainer = PollFor([&] { return ReadJsonFile(dir / "trainer.json"); }, f.timeout_s);
    if (!trainer) {
      if (first_error.empty()) first_error = "job " + id + ": no trainer.json in " + dir.string();
      ++failures;
      continue;
    }
    int64_t start_us = trainer->value("start_time_us", int64_t{0});
    sup_lat.push_back(start_us - t_submit);
    std::optional<int64_t> started;
    if (f.trainer_clock) {
      started = PollFor([&] { return ReadStampFile(dir / "work" / "started"); }, f.timeout_s);
      if (started) tr_lat.push_back(*started - t_submit);
    }
    // The job's end, so that the next job finds an idle node and controller.
    auto status = PollFor([&] { return ReadJsonFile(dir / "status.json"); }, f.timeout_s);
    if (!status || status->value("state", "") != "exited" || status->value("exit_code", -1) != 0) {
      if (first_error.empty()) {
        first_error =
            "job " + id + " did not exit 0: " + (status ? status->dump() : "no status.json");
      }
      ++failures;
    }
    auto terminal = PollFor(
        [&]() -> std::optional<std::string> {
          auto r = client.Call("GET", path + "/" + id, "", WithAuth());
          if (!r.ok() || r->status != 200) return std::nullopt;
          std::string state = json::parse(r->body, nullptr, false).value("state", "");
          if (state == "JOB_STATE_SUCCEEDED" || state == "JOB_STATE_FAILED") return state;
          return std::nullopt;
        },
        f.timeout_s, 5000);
    if (!terminal && first_error.empty())
      first_error = "job " + id + " never reached a final state";

    // Phases: create (server stamp before the INSERT) -> launch.json written
    // (controller woke, placed, committed PENDING, built the launch) ->
    // supervisor running (launch.json fsync+rename, posix_spawn, exec,
    // double fork) -> trainer forked (claim, its fsyncs, setup) -> exec'd.
    int64_t create = ParseRfc3339(resp.value("createTime", ""));
    int64_t launch = MtimeUs(dir / "launch.json");
    auto runner = ReadJsonFile(dir / "runner.json");
    int64_t sup_start = runner ? runner->value("start_time_us", int64_t{0}) : 0;
    if (create && launch && sup_start) {
      ph_create.push_back(t_submit - create);
      ph_queue.push_back(launch - create);
      ph_spawn.push_back(sup_start - launch);
      ph_fork.push_back(start_us - sup_start);
      create_to_fork.push_back(start_us - create);
      if (started) ph_exec.push_back(*started - start_us);
    }
  }

  json result = {{"mode", "start-latency"},
                 {"command", command},
                 {"jobs", jobs},
                 {"failures", failures},
                 {"submit_rtt", Summary(rtt)},
                 {"start_latency_supervisor_clock", Summary(sup_lat)},
                 {"phases",
                  {{"create_to_response", Summary(ph_create)},
                   {"create_to_launch_json", Summary(ph_queue)},
                   {"launch_json_to_supervisor", Summary(ph_spawn)},
                   {"supervisor_to_trainer_fork", Summary(ph_fork)}}},
                 // Issue #29's start-path figure: the job's record made to
                 // its trainer process forked.
                 {"create_to_trainer_fork", Summary(create_to_fork)}};
  if (f.trainer_clock) {
    result["start_latency_trainer_clock"] = Summary(tr_lat);
    result["phases"]["trainer_fork_to_exec"] = Summary(ph_exec);
  }
  if (!first_error.empty()) result["first_error"] = first_error;

  std::printf("stoker start-latency: %d jobs, command %s, %d failure(s)\n", jobs,
              json(command).dump().c_str(), failures);
  PrintSummary("submit RTT (POST round trip)", result["submit_rtt"]);
  PrintSummary("start latency, supervisor clock", result["start_latency_supervisor_clock"]);
  PrintSummary("createTime -> trainer forked", result["create_to_trainer_fork"]);
  if (f.trainer_clock)
    PrintSummary("start latency, trainer clock", result["start_latency_trainer_clock"]);
  std::printf(" phases:\n");
  for (auto& [k, v] : result["phases"].items()) PrintSummary(k, v);
  if (!first_error.empty()) std::printf("  first error: %s\n", first_error.c_str());
  WriteOut(f, result);
  return failures == 0 ? 0 : 2;
}

int SubmitRate(const Flags& f) {
  if (f.server.empty()) Die("submit-rate needs --server");
  int jobs = f.jobs > 0 ? f.jobs : 5000;
  const std::string path = JobsPath(f);
  // --gpu-queue: every job asks for the node's one T4 and sleeps, so the
  // first takes it and the rest stay QUEUED: the run measures the submit path
  // (parse, validate, admit, one durable INSERT, notify the controller, one
  // scheduling pass) without 5000 process launches on the same cores.
  // Without it the jobs run /bin/true and the launches compete with submits.
  const std::string body =
      f.gpu_queue ? JobBody({"/bin/sleep", "100000"}, true) : JobBody({"/bin/true"}, false);
  if (f.gpu_queue) {
    // The holder, outside the measurement.
    stoker::http::Client c(f.server);
    std::string error;
    if (SubmitOnce(c, path, body, &error).empty()) Die("submitting the GPU holder job: " + error);
  }

  std::atomic<int> next{0};
  std::atomic<int> ok{0}, errors{0};
  std::mutex mu;
  std::vector<double> lat;
  std::map<std::string, int> error_kinds;
  std::vector<int64_t> done_at;  // completion stamps, for the sustained rate
  int64_t t0 = NowUs();
  std::vector<std::thread> threads;
  for (int c = 0; c < f.clients; ++c) {
    threads.emplace_back([&] {
      stoker::http::Client client(f.server);
      std::vector<double> my_lat;
      std::vector<int64_t> my_done;
      std::map<std::string, int> my_errors;
      while (next.fetch_add(1) < jobs) {
        std::string error;
        int64_t a = NowUs();
        std::string id = SubmitOnce(client, path, body, &error);
        int64_t b = NowUs();
        if (id.empty()) {
          ++errors;
          ++my_errors[error.substr(0, 80)];
          continue;
        }
        ++ok;
        my_lat.push_back(b - a);
        my_done.push_back(b);
      }
      std::lock_guard lock(mu);
      lat.insert(lat.end(), my_lat.begin(), my_lat.end());
      done_at.insert(done_at.end(), my_done.begin(), my_done.end());
      for (auto& [k, n] : my_errors) error_kinds[k] += n;
    });
  }
  for (auto& t : threads) t.join();
  int64_t t1 = NowUs();
  double secs = (t1 - t0) / 1e6;
  std::sort(done_at.begin(), done_at.end());
  RateWindows rates = Rates(done_at);
  json result = {{"mode", "submit-rate"},
                 {"jobs", jobs},
                 {"clients", f.clients},
                 {"workload", f.gpu_queue ? "queued (GPU held)" : "/bin/true runs"},
                 {"ok", ok.load()},
                 {"errors", errors.load()},
                 {"error_kinds", error_kinds},
                 {"seconds", secs},
                 {"submissions_per_s", ok.load() / secs},
                 {"sustained_per_s", rates.middle},
                 {"first_fifth_per_s", rates.first},
                 {"last_fifth_per_s", rates.last},
                 {"submit_latency", Summary(lat)}};
  std::printf("stoker submit-rate: %d jobs, %d clients, %s: %d ok, %d errors in %.2f s\n", jobs,
              f.clients, result["workload"].get<std::string>().c_str(), ok.load(), errors.load(),
              secs);
  std::printf(
      "  durable submissions/s: %.0f overall, %.0f sustained (middle 80%%), %.0f first fifth, %.0f "
      "last fifth\n",
      ok.load() / secs, rates.middle, rates.first, rates.last);
  PrintSummary("POST latency under load", result["submit_latency"]);
  for (auto& [k, n] : error_kinds) std::printf("  error x%d: %s\n", n, k.c_str());
  WriteOut(f, result);
  return errors.load() == 0 ? 0 : 2;
}

// ---- Slurm ------------------------------------------------------------------

struct Proc {
  int exit_code = -1;
  std::string out;
};

// Runs argv (searched in PATH) with stdout captured, stderr to ours.
Proc RunProcess(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Die("pipe: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  Proc p;
  if (rc != 0) {
    ::close(fds[0]);
    p.out = std::string("cannot run ") + args[0] + ": " + std::strerror(rc);
    return p;
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) p.out.append(buf, n);
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return p;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int SbatchLatency(const Flags& f) {
  if (f.work_dir.empty()) Die("sbatch-latency needs --work-dir");
  int jobs = f.jobs > 0 ? f.jobs : 200;
  fs::path dir = fs::absolute(f.work_dir);
  fs::create_directories(dir);
  const std::string wrap = "date +%s%6N > " + dir.string() + "/started.$SLURM_JOB_ID";
  std::vector<double> rtt, lat;
  int failures = 0;
  std::string first_error;
  for (int i = 0; i < jobs; ++i) {
    int64_t t_send = NowUs();
    Proc p = RunProcess({"sbatch", "--parsable", "--job-name=stoker-bench-latency",
                         "--output=/dev/null", "--chdir=" + dir.string(), "--wrap", wrap});
    int64_t t_submit = NowUs();
    std::string id = Trim(p.out);
    id = id.substr(0, id.find(';'));  // "id;cluster" on federated setups
    if (p.exit_code != 0 || id.empty()) {
      if (first_error.empty())
        first_error = "sbatch exited " + std::to_string(p.exit_code) + ": " + p.out;
      ++failures;
      continue;
    }
    rtt.push_back(t_submit - t_send);
    auto started = PollFor([&] { return ReadStampFile(dir / ("started." + id)); }, f.timeout_s);
    if (!started) {
      if (first_error.empty()) first_error = "job " + id + " wrote no start stamp";
      ++failures;
    } else {
      lat.push_back(*started - t_submit);
    }
    // Gone from squeue (also past COMPLETING) before the next one.
    auto gone = PollFor(
        [&]() -> std::optional<bool> {
          Proc q = RunProcess({"squeue", "-h", "-j", id, "-o", "%T"});
          if (q.exit_code == 0 && Trim(q.out).empty()) return true;
          return std::nullopt;
        },
        f.timeout_s, 10'000);
    if (!gone && first_error.empty()) first_error = "job " + id + " still in squeue";
  }
  json result = {{"mode", "sbatch-latency"},
                 {"jobs", jobs},
                 {"failures", failures},
                 {"submit_rtt", Summary(rtt)},
                 {"start_latency_trainer_clock", Summary(lat)}};
  if (!first_error.empty()) result["first_error"] = first_error;
  std::printf("slurm sbatch-latency: %d jobs, %d failure(s)\n", jobs, failures);
  PrintSummary("submit RTT (sbatch process)", result["submit_rtt"]);
  PrintSummary("start latency, job clock", result["start_latency_trainer_clock"]);
  if (!first_error.empty()) std::printf("  first error: %s\n", first_error.c_str());
  WriteOut(f, result);
  return failures == 0 ? 0 : 2;
}

int SbatchRate(const Flags& f) {
  int jobs = f.jobs > 0 ? f.jobs : 1000;
  // --hold: accepted and queued but never started, the analogue of
  // submit-rate --gpu-queue. One sbatch process per submission is how Slurm
  // is used; there is no keep-alive client.
  const std::string name = "stoker-bench-rate";
  std::atomic<int> next{0}, ok{0}, errors{0};
  std::mutex mu;
  std::vector<double> lat;
  std::vector<int64_t> done_at;
  std::string first_error;
  int64_t t0 = NowUs();
  std::vector<std::thread> threads;
  for (int c = 0; c < f.clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> my_lat;
      std::vector<int64_t> my_done;
      while (next.fetch_add(1) < jobs) {
        int64_t a = NowUs();
        Proc p = RunProcess({"sbatch", "--parsable", "--hold", "--job-name=" + name,
                             "--output=/dev/null", "--wrap", "true"});
        int64_t b = NowUs();
        if (p.exit_code != 0) {
          ++errors;
          std::lock_guard lock(mu);
          if (first_error.empty()) first_error = p.out;
          continue;
        }
        ++ok;
        my_lat.push_back(b - a);
        my_done.push_back(b);
      }
      std::lock_guard lock(mu);
      lat.insert(lat.end(), my_lat.begin(), my_lat.end());
      done_at.insert(done_at.end(), my_done.begin(), my_done.end());
    });
  }
  for (auto& t : threads) t.join();
  int64_t t1 = NowUs();
  RunProcess({"scancel", "--name=" + name});
  double secs = (t1 - t0) / 1e6;
  std::sort(done_at.begin(), done_at.end());
  RateWindows rates = Rates(done_at);
  json result = {{"mode", "sbatch-rate"},
                 {"jobs", jobs},
                 {"clients", f.clients},
                 {"ok", ok.load()},
                 {"errors", errors.load()},
                 {"seconds", secs},
                 {"submissions_per_s", ok.load() / secs},
                 {"sustained_per_s", rates.middle},
                 {"first_fifth_per_s", rates.first},
                 {"last_fifth_per_s", rates.last},
                 {"submit_latency", Summary(lat)}};
  if (!first_error.empty()) result["first_error"] = first_error;
  std::printf(
      "slurm sbatch-rate: %d jobs (--hold), %d client process(es) at a time: %d ok, %d errors in "
      "%.2f s\n",
      jobs, f.clients, ok.load(), errors.load(), secs);
  std::printf(
      "  submissions/s: %.0f overall, %.0f sustained (middle 80%%), %.0f first fifth, %.0f last "
      "fifth\n",
      ok.load() / secs, rates.middle, rates.first, rates.last);
  PrintSummary("sbatch latency under load", result["submit_latency"]);
  WriteOut(f, result);
  return errors.load() == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = ParseFlags(argc, argv);
  if (f.mode == "start-latency") return StartLatency(f);
  if (f.mode == "submit-rate") return SubmitRate(f);
  if (f.mode == "sbatch-latency") return SbatchLatency(f);
  if (f.mode == "sbatch-rate") return SbatchRate(f);
  Die("unknown mode '" + f.mode + "'\n" + kUsage);
}

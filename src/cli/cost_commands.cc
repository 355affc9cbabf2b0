// Usage, cost and budgets (docs/cost.md): `stoker usage`, `stoker cost
// estimate`, `stoker budgets`, and the usage lines of `jobs describe` and
// `hptuning describe`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "common/files.h"
#include "common/json_yaml.h"
#include "http/http.h"
#include "spec/ai_platform.h"

namespace stoker::cli {

using nlohmann::json;

namespace {

std::string Num(double v, const char* fmt = "%.2f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "$1.23"; under a dollar, three significant digits ("$0.000231"), so that
// short jobs compare instead of all reading $0.00; "-" when unknown.
std::string Money(const json& v) {
  if (!v.is_number()) return "-";
  const double usd = v.get<double>();
  if (usd == 0 || std::fabs(usd) >= 1) return "$" + Num(usd);
  const int decimals =
      std::clamp(2 - static_cast<int>(std::floor(std::log10(std::fabs(usd)))), 2, 9);
  char buf[48];
  std::snprintf(buf, sizeof buf, "$%.*f", decimals, usd);
  return buf;
}

// A CSV field, quoted when it needs to be (RFC 4180).
std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string GpuTypes(const json& usage) {
  std::string out;
  const json by_type = usage.value("gpuHoursByType", json::object());  // outlives the loop
  for (auto& [type, hours] : by_type.items()) {
    out += (out.empty() ? "" : ", ") + Num(hours.get<double>(), "%.3g") + " " + type;
  }
  return out;
}

}  // namespace

void PrintUsage(const json& usage, const std::string& indent) {
  if (!usage.is_object()) return;
  std::cout << indent << "usage:    " << Num(usage.value("replicaHours", 0.0), "%.3g")
            << " replica-hours";
  if (usage.value("gpuHours", 0.0) > 0) std::cout << ", GPU-hours " << GpuTypes(usage);
  std::cout << ", " << Num(usage.value("vcpuHours", 0.0), "%.3g") << " vCPU-hours, "
            << Num(usage.value("memoryGbHours", 0.0), "%.3g") << " GB-hours\n";
  if (usage.contains("telemetry")) {
    const json& t = usage["telemetry"];
    double sampled = t.value("sampledGpuHours", 0.0), busy = t.value("busyGpuHours", 0.0);
    std::cout << indent << "GPUs:     busy " << Num(sampled > 0 ? busy / sampled * 100 : 0, "%.0f")
              << "% of the " << Num(sampled, "%.3g") << " GPU-hours sampled (idle "
              << Num(t.value("idleGpuHours", 0.0), "%.3g") << " GPU-hours)";
    if (t["energyKwh"].is_number()) {
      std::cout << ", " << Num(t["energyKwh"].get<double>(), "%.3g") << " kWh";
    }
    std::cout << "\n";
  }
  const json& usd = usage["usd"];
  std::cout << indent << "cost:     Vertex " << Money(usd["vertex"]) << ", Compute Engine "
            << Money(usd["compute-engine"]) << ", Spot " << Money(usd["spot"]) << ", own hardware "
            << Money(usd["own"]) << "\n";
  const json no_price = usage.value("noPrice", json::object());  // outlives the loop
  for (auto& [kind, reasons] : no_price.items()) {
    for (const json& r : reasons) {
      std::cout << indent << "          no " << kind << " price: " << r.get<std::string>() << "\n";
    }
  }
  for (const json& n : usage.value("notes", json::array())) {
    std::cout << indent << "          note: " << n.get<std::string>() << "\n";
  }
}

std::string VertexCost(const json& usage) {
  if (!usage.is_object()) return "-";
  return Money(usage["usd"]["vertex"]);
}

namespace {

// GET /v1/usage or /v1/usage:breakEven with the flags as its query.
Result<std::string> UsageTarget(const UsageFlags& f) {
  std::string target = "/v1/usage";
  std::vector<std::string> query;
  if (f.break_even) {
    target = "/v1/usage:breakEven";
    if (!f.start.empty() || !f.end.empty()) {
      return InvalidArgument("--start, --end: the break-even uses --days N (default 30)");
    }
  } else {
    query.push_back("groupBy=" + http::UrlEncode(f.by));
  }
  if (f.days > 0) query.push_back("days=" + Num(f.days, "%g"));
  if (!f.start.empty()) query.push_back("startTime=" + http::UrlEncode(f.start));
  if (!f.end.empty()) query.push_back("endTime=" + http::UrlEncode(f.end));
  for (size_t i = 0; i < query.size(); ++i) target += (i ? "&" : "?") + query[i];
  return target;
}

// "prices: REGIONS list prices of DATE (docs/prices.md)": a usage report
// prices each row in its job's region, so it names them all.
std::string PricesLine(const json& catalog) {
  std::string regions = catalog.value("region", "");
  if (auto r = catalog.find("regions"); r != catalog.end() && r->is_array() && !r->empty()) {
    regions.clear();
    for (const json& name : *r) regions += (regions.empty() ? "" : ", ") + name.get<std::string>();
  }
  return "prices: " + regions + " list prices of " + catalog.value("priceDate", "") +
         " (docs/prices.md)";
}

// `usage --break-even` as text: buy vs rent from GET /v1/usage:breakEven.
void PrintBreakEven(const json& j, const std::string& prices) {
  auto pct = [](const json& v) {
    return v.is_number() ? Num(v.get<double>() * 100, "%.1f") + "%" : std::string("-");
  };
  std::cout << "Buy vs rent, from the last " << Num(j.value("days", 0.0), "%g") << " days ("
            << j.value("jobs", 0) << " jobs)\n";
  std::cout << "  GPU-hours booked:        " << Num(j.value("gpuHours", 0.0), "%.4g") << " of "
            << Num(j.value("gpuCapacityHours", 0.0), "%.4g") << " (utilisation "
            << pct(j["utilisation"]) << ")\n";
  std::cout << "  on Vertex:               " << Money(j["vertexUsd"]) << " on demand, "
            << Money(j["spotUsd"]) << " Spot (per month: " << Money(j["vertexUsdPerMonth"]) << ", "
            << Money(j["spotUsdPerMonth"]) << ")\n";
  std::cout << "  Colab-class free tier:   " << j.value("colabFreeTierJobs", 0)
            << " jobs would fit (Vertex price of those " << Money(j["colabFreeTierVertexUsd"])
            << "; free tiers guarantee no GPU and stop after 12 h)\n";
  std::cout << "  owning this node:        purchase " << Money(j["purchaseUsd"]) << ", "
            << Money(j["fixedUsdPerMonth"]) << "/month fixed, GPU power "
            << Money(j["powerUsdPerMonth"]) << "/month at this rate\n";
  std::cout << "  owning pays off above:   " << pct(j["breakEvenUtilisation"])
            << " GPU utilisation\n";
  std::cout << "  pays for itself in:      "
            << (j["paybackMonths"].is_number()
                    ? Num(j["paybackMonths"].get<double>(), "%.1f") + " months at this rate (by " +
                          j.value("paybackTime", "").substr(0, 10) + ")"
                    : std::string("- (not at this rate)"))
            << "\n";
  for (const json& n : j.value("notes", json::array())) {
    std::cout << "  note: " << n.get<std::string>() << "\n";
  }
  std::cout << "  " << prices << "\n";
}

// The rows of `stoker usage`: aligned text, or CSV with `--format csv`
// (bare numbers, empty cells for unknown values).
class UsageTable {
 public:
  explicit UsageTable(bool csv) : csv_(csv) {}

  void PrintCells(const std::vector<std::string>& cells) const {
    if (csv_) {
      for (size_t i = 0; i < cells.size(); ++i) std::cout << (i ? "," : "") << Csv(cells[i]);
      std::cout << "\n";
      return;
    }
    std::printf("%-24s %5s %10s %10s %10s %10s %10s %14s %10s %10s\n",
                cells[0].substr(0, 24).c_str(), cells[1].c_str(), cells[2].c_str(),
                cells[3].c_str(), cells[4].c_str(), cells[5].c_str(), cells[6].c_str(),
                cells[7].c_str(), cells[8].c_str(), cells[9].c_str());
  }

  // One group's (or the total's) usage `t` under `key`.
  void PrintRow(const std::string& key, const json& t) {
    std::string idle = csv_ ? "" : "-";  // "-": no telemetry
    if (t.contains("telemetry")) {
      sampled_ = true;
      idle = Num(t["telemetry"].value("idleGpuHours", 0.0), "%.4f");
    }
    PrintCells({key, std::to_string(t.value("jobs", 0)), Num(t.value("gpuHours", 0.0), "%.4f"),
                idle, Num(t.value("vcpuHours", 0.0), "%.4f"),
                Num(t.value("memoryGbHours", 0.0), "%.4f"), MoneyCell(t["usd"]["vertex"]),
                MoneyCell(t["usd"]["compute-engine"]), MoneyCell(t["usd"]["spot"]),
                MoneyCell(t["usd"]["own"])});
  }

  // Whether any row printed so far had GPU telemetry.
  bool sampled() const { return sampled_; }

 private:
  std::string MoneyCell(const json& v) const {
    if (csv_) return v.is_number() ? Num(v.get<double>(), "%.6f") : std::string();
    return Money(v);
  }

  bool csv_;
  bool sampled_ = false;
};

// What the text table's TOTAL leaves unpriced or unexplained, then `prices`.
void PrintUsageNotes(const json& total, bool sampled, const std::string& prices) {
  const json no_price = total.value("noPrice", json::object());  // outlives the loop
  for (auto& [kind, reasons] : no_price.items()) {
    for (const json& r : reasons) {
      std::cout << "no " << kind << " price for some usage: " << r.get<std::string>() << "\n";
    }
  }
  for (const json& n : total.value("notes", json::array())) {
    std::cout << "note: " << n.get<std::string>() << "\n";
  }
  if (!sampled && total.value("gpuHours", 0.0) > 0) {
    std::cout << "IDLE_GPU_H (booked, not busy): no GPU telemetry for this usage (GPUs declared "
                 "in the config, or gpu_telemetry_seconds: 0)\n";
  }
  std::cout << prices << "\n";
}

// `stoker usage` grouped, as text or CSV, from GET /v1/usage.
void PrintUsageReport(const Globals& g, const json& j, const std::string& prices) {
  const bool csv = g.format == "csv";
  UsageTable table(csv);
  std::vector<std::string> header = {"KEY",  "JOBS",   "GPU_H",          "IDLE_GPU_H", "VCPU_H",
                                     "GB_H", "VERTEX", "COMPUTE_ENGINE", "SPOT",       "OWN"};
  header[0] = j.value("groupBy", "key");
  if (!csv) {
    std::cout << "Usage from " << j.value("startTime", "") << " to " << j.value("endTime", "")
              << " by " << j.value("groupBy", "") << "\n";
  }
  table.PrintCells(header);
  for (const json& grp : j["groups"]) table.PrintRow(grp.value("key", ""), grp);
  if (csv) return;
  table.PrintRow("TOTAL", j["total"]);
  PrintUsageNotes(j["total"], table.sampled(), prices);
}

}  // namespace

int Usage(const Globals& g, const UsageFlags& f) {
  auto target = UsageTarget(f);
  if (!target.ok()) return Report(target.status());
  auto conn = Connect(g);
  if (!conn.ok()) return Report(conn.status());
  auto r = (*conn)->Call("GET", *target);
  if (!r.ok()) return Report(r.status());
  const json& j = *r;
  if (Structured(g)) {
    PrintResource(g, j);
    return 0;
  }
  const std::string prices = PricesLine(j["catalog"]);
  if (!f.break_even) {
    PrintUsageReport(g, j, prices);
    return 0;
  }
  if (g.format == "csv") {
    return Report(InvalidArgument("--format csv: use json or text with --break-even"));
  }
  PrintBreakEven(j, prices);
  return 0;
}

// An AI Platform job file (`gcloud ai-platform jobs submit training
// --config`: a trainingInput, bare or under "trainingInput" as in a Job)
// as the CustomJob it runs as, scale tiers and legacy machine names
// included; nullopt for anything else.
Result<std::optional<json>> FromAiPlatformFile(const json& file) {
  if (!file.is_object()) return std::optional<json>();
  const bool wrapped = file.contains("trainingInput");
  const bool bare =
      !file.contains("jobSpec") && !file.contains("workerPoolSpecs") &&
      (file.contains("scaleTier") || file.contains("masterType") || file.contains("masterConfig"));
  if (!wrapped && !bare) return std::optional<json>();
  std::map<std::string, std::string> labels;
  if (file.contains("labels") && file["labels"].is_object()) {
    for (const auto& [k, v] : file["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  // The trainer's package and module (flags of `jobs submit training`, often
  // absent from the file) do not change a price.
  json ti = wrapped ? file["trainingInput"] : file;
  if (ti.is_object()) {
    if (!ti.contains("packageUris")) ti["packageUris"] = {"gs://stoker-staging/estimate.tar.gz"};
    if (!ti.contains("pythonModule")) ti["pythonModule"] = "trainer.task";
  }
  STOKER_ASSIGN_OR_RETURN(
      spec::LegacyTraining legacy,
      spec::FromTrainingInput("estimate", ti, wrapped ? "trainingInput" : "", labels));
  return std::optional<json>(spec::ToJson(legacy.job));
}

int CostEstimate(const Globals& g, const std::string& config) {
  auto j =
      ReadConfigFile(config, "a CustomJob, CustomJobSpec or AI Platform trainingInput mapping");
  if (!j.ok()) return Report(j.status());
  json job = *j;
  auto legacy = FromAiPlatformFile(job);
  if (!legacy.ok()) return Report(legacy.status());
  // The region that prices it: --region when it names a Google Cloud region
  // (Stoker's own locations, such as "local", have no dash), else an AI
  // Platform file's trainingInput.region, else the server's cost.region.
  std::string region = g.region.find('-') != std::string::npos ? g.region : "";
  if (*legacy && region.empty()) {
    const json& ti = job.contains("trainingInput") ? job["trainingInput"] : job;
    if (ti.is_object() && ti.contains("region") && ti["region"].is_string()) {
      region = ti["region"].get<std::string>();
    }
  }
  const bool ai_platform = legacy->has_value();
  if (*legacy) job = **legacy;
  if (job.is_object() && !job.contains("jobSpec") && job.contains("workerPoolSpecs")) {
    json spec = job;
    job = {{"jobSpec", spec}};
    for (const char* k : {"displayName", "labels"}) {
      if (spec.contains(k)) {
        job[k] = spec[k];
        job["jobSpec"].erase(k);
      }
    }
  }
  if (job.is_object() && !job.contains("displayName")) job["displayName"] = "estimate";
  return CallAndPrint(
      g,
      [&](Connection& c) {
        return c.Call("POST", "/v1/cost:estimate" + (region.empty() ? "" : "?region=" + region),
                      job.dump());
      },
      [ai_platform](const json& e) {
        std::printf("%-5s %-20s %8s %10s %14s %10s %10s\n", "POOL", "MACHINE", "REPLICAS",
                    "VERTEX/H", "COMPUTE_ENG/H", "SPOT/H", "OWN/H");
        for (const json& p : e["pools"]) {
          const json& r = p["usdPerHour"];
          std::printf("%-5d %-20s %8lld %10s %14s %10s %10s\n", p.value("pool", 0),
                      p.value("machineType", "").substr(0, 20).c_str(),
                      static_cast<long long>(p.value("replicaCount", int64_t{1})),
                      Money(r["vertex"]).c_str(), Money(r["compute-engine"]).c_str(),
                      Money(r["spot"]).c_str(), Money(r["own"]).c_str());
          std::cout << "      " << p.value("basis", "") << " (confidence "
                    << p.value("confidence", "?") << ")\n";
          if (p.contains("noPrice"))
            std::cout << "      no price: " << p["noPrice"].get<std::string>() << "\n";
          if (p.contains("noPriceOwn")) {
            std::cout << "      no own-hardware price: " << p["noPriceOwn"].get<std::string>()
                      << "\n";
          }
        }
        const json& h = e["usdPerHour"];
        const json& t = e["usdAtTimeout"];
        std::cout << "Per hour:            Vertex " << Money(h["vertex"]) << ", Compute Engine "
                  << Money(h["compute-engine"]) << ", Spot " << Money(h["spot"]) << ", own "
                  << Money(h["own"]) << "\n";
        std::cout << "If it runs to its timeout (" << Num(e.value("timeoutHours", 0.0), "%g")
                  << " h): Vertex " << Money(t["vertex"]) << ", Compute Engine "
                  << Money(t["compute-engine"]) << ", Spot " << Money(t["spot"]) << ", own "
                  << Money(t["own"]) << "\n";
        for (const json& n : e.value("notes", json::array())) {
          std::cout << "note: " << n.get<std::string>() << "\n";
        }
        const double unit = e["catalog"].value("usdPerTrainingUnit", 0.0);
        if (ai_platform && h["compute-engine"].is_number() && unit > 0) {
          const double usd = h["compute-engine"].get<double>();
          std::cout << "AI Platform training units: " << Num(usd / unit, "%.4f")
                    << " per hour (Compute Engine " << Money(h["compute-engine"]) << " at $"
                    << Num(unit, "%.2f") << " per unit, the "
                    << (unit > 0.49 ? "Europe and Asia-Pacific" : "Americas") << " rate)\n";
        }
        std::cout << "prices: " << e["catalog"].value("region", "") << " list prices of "
                  << e["catalog"].value("priceDate", "") << " (docs/prices.md)\n";
      });
}

int BudgetsList(const Globals& g) {
  return CallAndPrint(
      g, [](Connection& c) { return c.Call("GET", "/v1/budgets"); },
      [](const json& out) {
        if (out["budgets"].empty()) {
          std::cout << "No budgets. An admin sets one with: stoker budgets set user:NAME "
                       "--monthly-usd 100\n";
          return;
        }
        std::printf("%-28s %-8s %-10s %s\n", "SCOPE", "STATE", "ON_LIMIT", "THIS MONTH");
        for (const json& b : out["budgets"]) {
          std::string state = b.value("exceeded", false)  ? "EXCEEDED"
                              : b.value("warning", false) ? "WARNING"
                                                          : "ok";
          std::printf("%-28s %-8s %-10s %s\n", b.value("scope", "").c_str(), state.c_str(),
                      b.value("stopRunning", false) ? "stop jobs" : "refuse new",
                      b.value("summary", "").c_str());
        }
      });
}

int BudgetsSet(const Globals& g, const BudgetFlags& f) {
  json body = {{"price", f.price}, {"warnAt", f.warn_at}, {"stopRunning", f.stop_running}};
  if (f.monthly_usd) body["monthlyUsd"] = *f.monthly_usd;
  if (f.monthly_gpu_hours) body["monthlyGpuHours"] = *f.monthly_gpu_hours;
  return CallAndPrint(
      g, [&](Connection& c) { return c.Call("PUT", "/v1/budgets/" + f.scope, body.dump()); },
      [](const json& b) { std::cout << "Budget set: " << b.value("summary", "") << "\n"; });
}

int BudgetsDelete(const Globals& g, const std::string& scope) {
  return CallAndPrint(
      g, [&](Connection& c) { return c.Call("DELETE", "/v1/budgets/" + scope); },
      [&](const json&) { std::cout << "Budget " << scope << " removed\n"; });
}

void RegisterCostCommands(CLI::App& app, Globals& g, int& rc) {
  struct Values {
    UsageFlags usage_flags;
    std::string cost_config;
    BudgetFlags bf;
    std::string bdel_scope;
  };
  auto v = std::make_shared<Values>();
  auto* usage = app.add_subcommand("usage", "GPU, CPU and memory use and its cost, grouped");
  usage->fallthrough();  // --format may follow the command, as gcloud allows
  usage
      ->add_option("--by", v->usage_flags.by,
                   "Group by user, project, month, job, gpu or label:KEY")
      ->capture_default_str();
  usage->add_option("--days", v->usage_flags.days, "The last N days (default: this calendar month)")
      ->check(CLI::PositiveNumber);
  usage->add_option("--start", v->usage_flags.start,
                    "From this time (RFC 3339, e.g. 2026-11-01T00:00:00Z)");
  usage->add_option("--end", v->usage_flags.end, "Until this time (RFC 3339; default now)");
  usage->add_flag("--break-even", v->usage_flags.break_even,
                  "Buy vs rent: Vertex vs owning this node, from the last --days (default 30)");
  usage->callback([&g, &rc, v] { rc = Usage(g, v->usage_flags); });

  auto* cost = app.add_subcommand("cost", "Prices of jobs before they run");
  cost->require_subcommand(1);
  cost->fallthrough();
  auto* estimate = cost->add_subcommand(
      "estimate", "What a job would cost per hour and up to its timeout (Vertex, Spot, own)");
  estimate->fallthrough();
  estimate->add_option("--config", v->cost_config, "CustomJob or CustomJobSpec file (YAML or JSON)")
      ->required();
  estimate->callback([&g, &rc, v] { rc = CostEstimate(g, v->cost_config); });

  auto* budgets = app.add_subcommand("budgets", "Monthly budgets per user, project or label");
  budgets->require_subcommand(1);
  budgets->fallthrough();
  budgets->add_subcommand("list", "Budgets and how much of each this month used")
      ->fallthrough()
      ->callback([&g, &rc] { rc = BudgetsList(g); });
  auto* bset = budgets->add_subcommand("set", "Create or change a budget (admins)");
  bset->fallthrough();
  bset->add_option("SCOPE", v->bf.scope, "user:NAME, project:NAME or label:KEY=VALUE")->required();
  bset->add_option("--monthly-usd", v->bf.monthly_usd, "Limit in US dollars per calendar month");
  bset->add_option("--monthly-gpu-hours", v->bf.monthly_gpu_hours, "Limit in booked GPU-hours");
  bset->add_option("--price", v->bf.price, "Which price counts: vertex, compute-engine, spot, own")
      ->check(CLI::IsMember({"vertex", "compute-engine", "spot", "own"}))
      ->capture_default_str();
  bset->add_option("--warn-at", v->bf.warn_at, "Warn (an event on the jobs) at this fraction")
      ->capture_default_str();
  bset->add_flag("--stop-running", v->bf.stop_running,
                 "At the limit, also cancel the scope's running jobs (default: refuse new ones)");
  bset->callback([&g, &rc, v] { rc = BudgetsSet(g, v->bf); });
  auto* bdel = budgets->add_subcommand("delete", "Remove a budget (admins)");
  bdel->add_option("SCOPE", v->bdel_scope)->required();
  bdel->callback([&g, &rc, v] { rc = BudgetsDelete(g, v->bdel_scope); });
}

}  // namespace stoker::cli

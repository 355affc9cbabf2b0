// The one reader of the price tables (prices/*.yaml: the per-region ones, the
// hand-read us-central1 one, own hardware), which the build embeds as text
// (embed_price_tables.cmake, decision 0046).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost/catalog_internal.h"

namespace stoker::cost::internal {
namespace {

// `node` as a figure: a number >= 0, or (when `null_ok`) null = none (-1).
// InvalidArgument naming `where` otherwise.
Result<double> ReadFigure(const YAML::Node& node, const std::string& where, bool null_ok) {
  if (null_ok && node.IsNull()) return -1.0;
  const std::string expected = null_ok ? "a number >= 0 or null" : "a number >= 0";
  if (!node.IsScalar()) return InvalidArgument(where + ": must be " + expected);
  double v = 0;
  try {
    v = node.as<double>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(where + ": must be " + expected + " (got '" + node.Scalar() + "')");
  }
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(where + ": must be " + expected + " (got '" + node.Scalar() + "')");
  }
  return v;
}

// `node` as a non-empty string; InvalidArgument naming `where` otherwise.
Result<std::string> ReadName(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return InvalidArgument(where + ": must be a non-empty string");
  }
  return node.Scalar();
}

// Every key of the map `node` is one of `required` or `optional`, and every
// one of `required` is there; InvalidArgument naming `where` otherwise.
Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& required,
                 const std::vector<std::string>& optional, const std::string& where) {
  std::vector<std::string> keys = required;
  keys.insert(keys.end(), optional.begin(), optional.end());
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return InvalidArgument(where + ": unknown key '" + key + "' (expected " + Join(keys, ", ") +
                             ")");
    }
  }
  for (const std::string& key : required) {
    if (!node[key]) return InvalidArgument(where + ": missing " + key);
  }
  return OkStatus();
}

// `text` as YAML; InvalidArgument naming `file` (and the line) when it is
// empty or does not parse.
Result<YAML::Node> LoadTable(std::string_view text, const std::string& file) {
  if (text.empty()) return InvalidArgument(file + ": empty, or not embedded in this build");
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(file + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

// Calls `read(entry, "PATH[i]")` for each entry of the list `list` (PATH
// names it, e.g. "FILE: prices"), stopping at the first error;
// InvalidArgument when `list` is not a list.
template <typename Read>
Status ForEachEntry(const YAML::Node& list, const std::string& path, Read read) {
  if (!list.IsSequence()) return InvalidArgument(path + ": must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    STOKER_RETURN_IF_ERROR(read(list[i], path + "[" + std::to_string(i) + "]"));
  }
  return OkStatus();
}

Result<std::vector<std::string>> ReadRegions(const YAML::Node& node, const std::string& file) {
  if (!node.IsSequence() || node.size() == 0) {
    return InvalidArgument(file + ": regions: must be a list of region names");
  }
  std::vector<std::string> regions;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = file + ": regions[" + std::to_string(i) + "]";
    STOKER_ASSIGN_OR_RETURN(std::string region, ReadName(node[i], where));
    if (std::find(regions.begin(), regions.end(), region) != regions.end()) {
      return InvalidArgument(where + ": " + region + " is listed twice");
    }
    regions.push_back(region);
  }
  return regions;
}

// prices[i]: {region, <name_key>, compute_engine, spot}, its region one of `regions`.
Result<RegionalRow> ReadRow(const YAML::Node& node, const std::string& where,
                            const std::string& name_key, const std::vector<std::string>& regions) {
  if (!node.IsMap()) {
    return InvalidArgument(where + ": must be a map of region, " + name_key +
                           ", compute_engine, spot");
  }
  STOKER_RETURN_IF_ERROR(
      CheckKeys(node, {"region", name_key, "compute_engine", "spot"}, {}, where));
  RegionalRow row;
  STOKER_ASSIGN_OR_RETURN(row.region, ReadName(node["region"], where + ".region"));
  if (std::find(regions.begin(), regions.end(), row.region) == regions.end()) {
    return InvalidArgument(where + ".region: " + row.region + " is not in regions:");
  }
  STOKER_ASSIGN_OR_RETURN(row.name, ReadName(node[name_key], where + "." + name_key));
  STOKER_ASSIGN_OR_RETURN(row.compute_engine,
                          ReadFigure(node["compute_engine"], where + ".compute_engine", false));
  STOKER_ASSIGN_OR_RETURN(row.spot, ReadFigure(node["spot"], where + ".spot", true));
  return row;
}

// A rate: null (none), a bare number when `bare_ok` (its confidence and
// source left empty for the market's rule), or {usd, grade, source}.
Result<std::optional<Rate>> ReadTableRate(const YAML::Node& node, const std::string& where,
                                          bool bare_ok) {
  if (node.IsNull()) return std::optional<Rate>();
  if (bare_ok && node.IsScalar()) {
    STOKER_ASSIGN_OR_RETURN(double usd, ReadFigure(node, where, false));
    return std::optional<Rate>(Rate{usd, "", ""});
  }
  if (!node.IsMap()) {
    return InvalidArgument(where + ": must be null, " + (bare_ok ? "a number >= 0, " : "") +
                           "or a map of usd, grade, source");
  }
  STOKER_RETURN_IF_ERROR(CheckKeys(node, {"usd", "grade", "source"}, {}, where));
  Rate r;
  STOKER_ASSIGN_OR_RETURN(r.usd_per_hour, ReadFigure(node["usd"], where + ".usd", false));
  STOKER_ASSIGN_OR_RETURN(r.confidence, ReadName(node["grade"], where + ".grade"));
  if (r.confidence != "A" && r.confidence != "B" && r.confidence != "C") {
    return InvalidArgument(where + ".grade: must be A, B or C (got '" + r.confidence + "')");
  }
  STOKER_ASSIGN_OR_RETURN(r.source, ReadName(node["source"], where + ".source"));
  return std::optional<Rate>(std::move(r));
}

// `node` as a whole number from `min` to 1024; InvalidArgument naming `where` otherwise.
Result<int> ReadCount(const YAML::Node& node, const std::string& where, int min) {
  Result<double> v = ReadFigure(node, where, false);
  if (!v.ok() || !IsWhole(*v) || *v < min || *v > 1024) {
    return InvalidArgument(where + ": must be a whole number from " + std::to_string(min) +
                           " to 1024");
  }
  return static_cast<int>(*v);
}

// The optional gpu_type and gpu_count of a machine or a legacy name: both or
// neither, gpu_count at least 1.
Status ReadBundledGpus(const YAML::Node& node, const std::string& where, std::string& gpu_type,
                       int& gpu_count) {
  if (!node["gpu_type"] && !node["gpu_count"]) return OkStatus();
  if (!node["gpu_type"] || !node["gpu_count"]) {
    return InvalidArgument(where + ": gpu_type and gpu_count go together (set both or neither)");
  }
  STOKER_ASSIGN_OR_RETURN(gpu_type, ReadName(node["gpu_type"], where + ".gpu_type"));
  STOKER_ASSIGN_OR_RETURN(gpu_count, ReadCount(node["gpu_count"], where + ".gpu_count", 1));
  return OkStatus();
}

// machines[i]: {name, vcpus, memory_gb, [gpu_type, gpu_count,] compute_engine, spot, vertex}.
Status ReadMachine(const YAML::Node& node, const std::string& where, HandPrices& out) {
  if (!node.IsMap()) return InvalidArgument(where + ": must be a map");
  STOKER_RETURN_IF_ERROR(
      CheckKeys(node, {"name", "vcpus", "memory_gb", "compute_engine", "spot", "vertex"},
                {"gpu_type", "gpu_count"}, where));
  STOKER_ASSIGN_OR_RETURN(std::string name, ReadName(node["name"], where + ".name"));
  MachinePrice m;
  STOKER_ASSIGN_OR_RETURN(m.vcpus, ReadFigure(node["vcpus"], where + ".vcpus", false));
  STOKER_ASSIGN_OR_RETURN(m.memory_gb, ReadFigure(node["memory_gb"], where + ".memory_gb", false));
  STOKER_RETURN_IF_ERROR(ReadBundledGpus(node, where, m.gpu_type, m.gpu_count));
  STOKER_ASSIGN_OR_RETURN(m.compute_engine,
                          ReadTableRate(node["compute_engine"], where + ".compute_engine", true));
  STOKER_ASSIGN_OR_RETURN(m.spot, ReadTableRate(node["spot"], where + ".spot", true));
  STOKER_ASSIGN_OR_RETURN(m.vertex, ReadTableRate(node["vertex"], where + ".vertex", true));
  if (!out.machines.emplace(name, std::move(m)).second) {
    return InvalidArgument(where + ".name: " + name + " is listed twice");
  }
  return OkStatus();
}

// accelerators[i]: {name, compute_engine, spot, vertex, n1_counts}.
Status ReadAccelerator(const YAML::Node& node, const std::string& where, HandPrices& out) {
  if (!node.IsMap()) return InvalidArgument(where + ": must be a map");
  STOKER_RETURN_IF_ERROR(
      CheckKeys(node, {"name", "compute_engine", "spot", "vertex", "n1_counts"}, {}, where));
  STOKER_ASSIGN_OR_RETURN(std::string name, ReadName(node["name"], where + ".name"));
  AcceleratorPrice a;
  STOKER_ASSIGN_OR_RETURN(a.compute_engine,
                          ReadTableRate(node["compute_engine"], where + ".compute_engine", false));
  STOKER_ASSIGN_OR_RETURN(a.spot, ReadTableRate(node["spot"], where + ".spot", false));
  STOKER_ASSIGN_OR_RETURN(a.vertex, ReadTableRate(node["vertex"], where + ".vertex", false));
  STOKER_RETURN_IF_ERROR(ForEachEntry(node["n1_counts"], where + ".n1_counts",
                                      [&a](const YAML::Node& count, const std::string& at) {
                                        STOKER_ASSIGN_OR_RETURN(int n, ReadCount(count, at, 1));
                                        a.n1_counts.push_back(n);
                                        return OkStatus();
                                      }));
  if (!out.accelerators.emplace(name, std::move(a)).second) {
    return InvalidArgument(where + ".name: " + name + " is listed twice");
  }
  return OkStatus();
}

// legacy_machines[i]: {name, machine_type, [gpu_type, gpu_count,] usd_2019};
// its GPU one of the accelerators read before.
Status ReadLegacy(const YAML::Node& node, const std::string& where, HandPrices& out) {
  if (!node.IsMap()) return InvalidArgument(where + ": must be a map");
  STOKER_RETURN_IF_ERROR(
      CheckKeys(node, {"name", "machine_type", "usd_2019"}, {"gpu_type", "gpu_count"}, where));
  LegacyMachine l;
  STOKER_ASSIGN_OR_RETURN(l.name, ReadName(node["name"], where + ".name"));
  STOKER_ASSIGN_OR_RETURN(l.machine_type, ReadName(node["machine_type"], where + ".machine_type"));
  STOKER_RETURN_IF_ERROR(ReadBundledGpus(node, where, l.gpu_type, l.gpu_count));
  if (!l.gpu_type.empty() && !out.accelerators.count(l.gpu_type)) {
    return InvalidArgument(where + ".gpu_type: " + l.gpu_type + " is not among the accelerators");
  }
  STOKER_ASSIGN_OR_RETURN(l.usd_2019, ReadFigure(node["usd_2019"], where + ".usd_2019", false));
  for (const LegacyMachine& before : out.legacy_machines) {
    if (before.name == l.name)
      return InvalidArgument(where + ".name: " + l.name + " is listed twice");
  }
  out.legacy_machines.push_back(std::move(l));
  return OkStatus();
}

// gpus[i]: {gpu_type, purchase_usd, life_years, watts, source}.
Status ReadOwnGpu(const YAML::Node& node, const std::string& where, OwnHardwareTable& out) {
  if (!node.IsMap()) return InvalidArgument(where + ": must be a map");
  STOKER_RETURN_IF_ERROR(
      CheckKeys(node, {"gpu_type", "purchase_usd", "life_years", "watts", "source"}, {}, where));
  STOKER_ASSIGN_OR_RETURN(std::string gpu, ReadName(node["gpu_type"], where + ".gpu_type"));
  Asset a;
  STOKER_ASSIGN_OR_RETURN(a.purchase_usd,
                          ReadFigure(node["purchase_usd"], where + ".purchase_usd", false));
  STOKER_ASSIGN_OR_RETURN(a.life_years,
                          ReadFigure(node["life_years"], where + ".life_years", false));
  if (a.life_years == 0) return InvalidArgument(where + ".life_years: must be a number > 0");
  STOKER_ASSIGN_OR_RETURN(a.watts, ReadFigure(node["watts"], where + ".watts", false));
  STOKER_ASSIGN_OR_RETURN(a.source, ReadName(node["source"], where + ".source"));
  if (!out.own.gpus.emplace(gpu, std::move(a)).second) {
    return InvalidArgument(where + ".gpu_type: " + gpu + " is listed twice");
  }
  return OkStatus();
}

// known_watts[i]: {gpu_type, watts, source}.
Status ReadKnownWatts(const YAML::Node& node, const std::string& where, OwnHardwareTable& out) {
  if (!node.IsMap()) return InvalidArgument(where + ": must be a map");
  STOKER_RETURN_IF_ERROR(CheckKeys(node, {"gpu_type", "watts", "source"}, {}, where));
  KnownWatts k;
  STOKER_ASSIGN_OR_RETURN(k.gpu_type, ReadName(node["gpu_type"], where + ".gpu_type"));
  STOKER_ASSIGN_OR_RETURN(k.watts, ReadFigure(node["watts"], where + ".watts", false));
  STOKER_ASSIGN_OR_RETURN(k.source, ReadName(node["source"], where + ".source"));
  for (const KnownWatts& before : out.known_watts) {
    if (before.gpu_type == k.gpu_type) {
      return InvalidArgument(where + ".gpu_type: " + k.gpu_type + " is listed twice");
    }
  }
  out.known_watts.push_back(std::move(k));
  return OkStatus();
}

// `read` bound to `out`, for ForEachEntry.
template <typename Table>
auto Into(Table& out, Status (*read)(const YAML::Node&, const std::string&, Table&)) {
  return [&out, read](const YAML::Node& node, const std::string& where) {
    return read(node, where, out);
  };
}

// The embedded table `name` as `parse` reads it; aborts when it is malformed
// (a broken build: catalog_test parses every table first).
template <typename Parse>
auto ShippedTable(const char* name, Parse parse) {
  auto table = parse(PriceTableText(name), std::string("src/cost/prices/") + name);
  if (!table.ok()) {
    std::fprintf(stderr, "stoker: the built-in price table is broken: %s\n",
                 table.status().message().c_str());
    std::abort();
  }
  return std::move(table).value();
}

}  // namespace

Result<RegionalTable> ParseRegionalTable(std::string_view text, const std::string& file,
                                         const std::string& name_key) {
  STOKER_ASSIGN_OR_RETURN(YAML::Node root, LoadTable(text, file));
  if (!root.IsMap()) return InvalidArgument(file + ": must be a map of regions and prices");
  STOKER_RETURN_IF_ERROR(CheckKeys(root, {"regions", "prices"}, {}, file));
  RegionalTable table;
  STOKER_ASSIGN_OR_RETURN(table.regions, ReadRegions(root["regions"], file));
  std::map<std::pair<std::string, std::string>, size_t> seen;  // (region, name) -> entry
  STOKER_RETURN_IF_ERROR(ForEachEntry(
      root["prices"], file + ": prices", [&](const YAML::Node& node, const std::string& where) {
        STOKER_ASSIGN_OR_RETURN(RegionalRow row, ReadRow(node, where, name_key, table.regions));
        auto [it, added] = seen.emplace(std::make_pair(row.region, row.name), table.rows.size());
        if (!added) {
          return InvalidArgument(where + ": " + row.region + " " + row.name + " repeats prices[" +
                                 std::to_string(it->second) + "]");
        }
        table.rows.push_back(std::move(row));
        return OkStatus();
      }));
  return table;
}

const RegionalTable& S1MachineTable() {
  static const RegionalTable table =
      ShippedTable("s1_regions.yaml", [](std::string_view text, const std::string& file) {
        return ParseRegionalTable(text, file, "machine_type");
      });
  return table;
}

const RegionalTable& S2GpuTable() {
  static const RegionalTable table =
      ShippedTable("s2_gpu_regions.yaml", [](std::string_view text, const std::string& file) {
        return ParseRegionalTable(text, file, "accelerator");
      });
  return table;
}

Result<HandPrices> ParseHandPrices(std::string_view text, const std::string& file) {
  STOKER_ASSIGN_OR_RETURN(YAML::Node root, LoadTable(text, file));
  if (!root.IsMap()) {
    return InvalidArgument(file + ": must be a map of machines, accelerators, legacy_machines");
  }
  STOKER_RETURN_IF_ERROR(
      CheckKeys(root, {"machines", "accelerators", "legacy_machines"}, {"sources"}, file));
  if (root["sources"] && !root["sources"].IsSequence()) {
    return InvalidArgument(file + ": sources: must be a list (of the texts rates cite)");
  }
  HandPrices out;
  STOKER_RETURN_IF_ERROR(
      ForEachEntry(root["machines"], file + ": machines", Into(out, ReadMachine)));
  STOKER_RETURN_IF_ERROR(
      ForEachEntry(root["accelerators"], file + ": accelerators", Into(out, ReadAccelerator)));
  STOKER_RETURN_IF_ERROR(
      ForEachEntry(root["legacy_machines"], file + ": legacy_machines", Into(out, ReadLegacy)));
  return out;
}

const HandPrices& UsCentral1Prices() {
  static const HandPrices prices = ShippedTable("us_central1.yaml", ParseHandPrices);
  return prices;
}

Result<OwnHardwareTable> ParseOwnHardware(std::string_view text, const std::string& file) {
  STOKER_ASSIGN_OR_RETURN(YAML::Node root, LoadTable(text, file));
  if (!root.IsMap()) {
    return InvalidArgument(file + ": must be a map of usd_per_kwh, pue, gpus, known_watts");
  }
  STOKER_RETURN_IF_ERROR(CheckKeys(root, {"usd_per_kwh", "pue", "gpus", "known_watts"}, {}, file));
  OwnHardwareTable out;
  STOKER_ASSIGN_OR_RETURN(out.own.usd_per_kwh,
                          ReadFigure(root["usd_per_kwh"], file + ": usd_per_kwh", false));
  STOKER_ASSIGN_OR_RETURN(out.own.pue, ReadFigure(root["pue"], file + ": pue", false));
  if (out.own.pue < 1) return InvalidArgument(file + ": pue: must be a number >= 1");
  STOKER_RETURN_IF_ERROR(ForEachEntry(root["gpus"], file + ": gpus", Into(out, ReadOwnGpu)));
  STOKER_RETURN_IF_ERROR(
      ForEachEntry(root["known_watts"], file + ": known_watts", Into(out, ReadKnownWatts)));
  return out;
}

const OwnHardwareTable& OwnHardwareDefaults() {
  static const OwnHardwareTable table = ShippedTable("own_hardware.yaml", ParseOwnHardware);
  return table;
}

}  // namespace stoker::cost::internal

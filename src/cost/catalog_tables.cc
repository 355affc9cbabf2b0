// The one reader of the per-region price tables (prices/*.yaml), which the
// build embeds as text (embed_price_tables.cmake, decision 0046).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
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

// `node` as a non-empty name; InvalidArgument naming `where` otherwise.
Result<std::string> ReadName(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar() || node.Scalar().empty()) {
    return InvalidArgument(where + ": must be a name");
  }
  return node.Scalar();
}

// Every key of the map `node` is one of `keys`; InvalidArgument naming `where` otherwise.
Status CheckKeys(const YAML::Node& node, const std::vector<std::string>& keys,
                 const std::string& where) {
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return InvalidArgument(where + ": unknown key '" + key + "' (expected " + Join(keys, ", ") +
                             ")");
    }
  }
  for (const std::string& key : keys) {
    if (!node[key]) return InvalidArgument(where + ": missing " + key);
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
  STOKER_RETURN_IF_ERROR(CheckKeys(node, {"region", name_key, "compute_engine", "spot"}, where));
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

// The embedded table `name`, parsed; aborts when it is malformed (a broken
// build: catalog_test parses every table first).
RegionalTable ShippedTable(const char* name, const char* name_key) {
  const std::string file = std::string("src/cost/prices/") + name;
  Result<RegionalTable> table = ParseRegionalTable(PriceTableText(name), file, name_key);
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
  if (text.empty()) return InvalidArgument(file + ": empty, or not embedded in this build");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(file + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return InvalidArgument(file + ": must be a map of regions and prices");
  STOKER_RETURN_IF_ERROR(CheckKeys(root, {"regions", "prices"}, file));
  RegionalTable table;
  STOKER_ASSIGN_OR_RETURN(table.regions, ReadRegions(root["regions"], file));
  const YAML::Node prices = root["prices"];
  if (!prices.IsSequence()) return InvalidArgument(file + ": prices: must be a list");
  std::map<std::pair<std::string, std::string>, size_t> seen;  // (region, name) -> entry
  for (size_t i = 0; i < prices.size(); ++i) {
    const std::string where = file + ": prices[" + std::to_string(i) + "]";
    STOKER_ASSIGN_OR_RETURN(RegionalRow row, ReadRow(prices[i], where, name_key, table.regions));
    auto [it, added] = seen.emplace(std::make_pair(row.region, row.name), i);
    if (!added) {
      return InvalidArgument(where + ": " + row.region + " " + row.name + " repeats prices[" +
                             std::to_string(it->second) + "]");
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

const RegionalTable& S1MachineTable() {
  static const RegionalTable table = ShippedTable("s1_regions.yaml", "machine_type");
  return table;
}

const RegionalTable& S2GpuTable() {
  static const RegionalTable table = ShippedTable("s2_gpu_regions.yaml", "accelerator");
  return table;
}

}  // namespace stoker::cost::internal

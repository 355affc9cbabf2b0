// Internal to cost/: what the catalog's files share. catalog.cc prices a
// replica, catalog_prices.cc makes the shipped catalog (Catalog::BuiltIn) from
// the price tables the build embeds from prices/, which catalog_tables.cc reads,
// catalog_config.cc reads the config's `cost:` section (Catalog::Apply). Not a
// public header; only cost/catalog*.cc (and the generated price_tables.cc)
// include it.
//
// All functions are pure and thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "cost/catalog.h"

namespace stoker::cost::internal {

// The confidence and source of a figure the operator set in the config.
inline constexpr char kConfig[] = "config";

// The three markets a replica is priced in, and how messages and config keys name them.
enum Market { kVertex, kComputeEngine, kSpot, kMarkets };
inline constexpr const char* kMarketNames[kMarkets] = {"Vertex", "Compute Engine on-demand",
                                                       "Compute Engine Spot"};
inline constexpr const char* kMachineKeys[kMarkets] = {
    "vertex_usd_per_hour", "compute_engine_usd_per_hour", "spot_usd_per_hour"};
inline constexpr const char* kAcceleratorKeys[kMarkets] = {
    "vertex_usd_per_gpu_hour", "compute_engine_usd_per_gpu_hour", "spot_usd_per_gpu_hour"};

// A number as messages show it: up to 10 significant digits, no trailing zeros.
std::string Num(double v);
// `parts` joined with `sep`.
std::string Join(const std::vector<std::string>& parts, const char* sep);
bool IsWhole(double c);

// A legacy AI Platform machine name and the Compute Engine machine (and
// GPUs) it was built on.
struct LegacyMachine {
  std::string name;
  std::string machine_type;
  std::string gpu_type;  // "" = none
  int gpu_count = 0;
  double usd_2019 = 0;  // S4b, 2019-11-04
};
// The row of a legacy name (standard, complex_model_m_gpu, ...); nullptr for any other.
const LegacyMachine* FindLegacy(const std::string& name);

// Why a shipped row (a machine or an accelerator) lacks a figure in
// `region`, for the reason text; "" when there is no particular reason.
std::string WhyMissing(const std::string& name, const std::string& region);

// The per-region price tables (prices/*.yaml, decision 0046): a list of the
// regions read, and what a machine type (S1) or a GPU (S2) costs in each.
struct RegionalRow {
  std::string region;
  std::string name;           // machine type (S1) or accelerator type (S2)
  double compute_engine = 0;  // on demand: $/h of the whole VM, or $/GPU-h
  double spot = -1;           // Spot snapshot, same unit; < 0 = none
};
struct RegionalTable {
  std::vector<std::string> regions;
  std::vector<RegionalRow> rows;
};

// The text of prices/`name` (e.g. "s2_gpu_regions.yaml") as the build
// embedded it (price_tables.cc, written by embed_price_tables.cmake); empty
// when there is no such table.
std::string_view PriceTableText(std::string_view name);

// Parses a per-region table: `regions:` (a list of names) and `prices:` (a
// list of {region, <name_key>, compute_engine, spot}, spot null when there is
// none). InvalidArgument naming `file`, the entry (prices[3]) and the field
// on a syntax error, a missing or unknown key, a figure that is not a number
// >= 0, a region not in `regions:`, or a row repeated.
Result<RegionalTable> ParseRegionalTable(std::string_view text, const std::string& file,
                                         const std::string& name_key);

// The regions the catalog prices and S1's Compute Engine prices of each
// machine type in them (prices/s1_regions.yaml, written by s1_regions.py), and
// S2's per-GPU prices of the GPUs that attach to N1, per region
// (prices/s2_gpu_regions.yaml, written by s2_gpu_regions.py). Each is parsed
// on first use (thread-safe). A malformed table aborts naming file, entry and
// field; catalog_test parses every table, so a bad one fails the tests first.
const RegionalTable& S1MachineTable();
const RegionalTable& S2GpuTable();

// The us-central1 figures read by hand (prices/us_central1.yaml): machine
// types, accelerators, legacy AI Platform names. A machine's rate the table
// gives as a bare number has an empty confidence and source: the catalog's
// rule for that market grades it (catalog_prices.cc).
struct HandPrices {
  std::map<std::string, MachinePrice> machines;
  std::map<std::string, AcceleratorPrice> accelerators;
  std::vector<LegacyMachine> legacy_machines;
};

// Parses the hand-read table (the format us_central1.yaml's header
// describes). InvalidArgument naming `file`, the entry (machines[3]) and the
// field on a syntax error, a missing or unknown key, a figure that is not a
// number >= 0, a grade not A, B or C, a repeated name, or a legacy name's GPU
// that is not among the accelerators.
Result<HandPrices> ParseHandPrices(std::string_view text, const std::string& file);

// prices/us_central1.yaml, parsed on first use (thread-safe); a malformed
// table aborts as S1MachineTable's does.
const HandPrices& UsCentral1Prices();

// The power of a GPU type whose purchase price is not published, so that a
// config entry that gives only the purchase price still counts power.
struct KnownWatts {
  std::string gpu_type;
  double watts = 0;
  std::string source;
};
// nullptr when the GPU type's power is not known.
const KnownWatts* FindKnownWatts(const std::string& gpu_type);

// The own-hardware defaults (prices/own_hardware.yaml).
struct OwnHardwareTable {
  OwnHardware own;  // usd_per_kwh, pue, the GPUs with a purchase price; no node
  std::vector<KnownWatts> known_watts;
};

// Parses the own-hardware table (the format own_hardware.yaml shows).
// InvalidArgument naming `file`, the entry (gpus[1]) and the field on a syntax
// error, a missing or unknown key, a figure out of range (pue >= 1,
// life_years > 0, the others >= 0), or a GPU type listed twice.
Result<OwnHardwareTable> ParseOwnHardware(std::string_view text, const std::string& file);

// prices/own_hardware.yaml, parsed on first use (thread-safe); a malformed
// table aborts as S1MachineTable's does.
const OwnHardwareTable& OwnHardwareDefaults();

}  // namespace stoker::cost::internal

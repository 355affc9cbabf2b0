// Internal to cost/: what the catalog's files share. catalog.cc prices a
// replica, catalog_prices.cc holds the shipped price tables (Catalog::BuiltIn),
// catalog_config.cc reads the config's `cost:` section (Catalog::Apply). Not a
// public header; only cost/catalog*.cc include it.
//
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <vector>

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
  const char* name;
  const char* machine_type;
  const char* gpu_type;  // "" = none
  int gpu_count;
  double usd_2019;  // S4b, 2019-11-04
};
// The row of a legacy name (standard, complex_model_m_gpu, ...); nullptr for any other.
const LegacyMachine* FindLegacy(const std::string& name);

// Why a shipped row (a machine or an accelerator) lacks a figure, for the
// reason text; "" when there is no particular reason.
std::string WhyMissing(const std::string& name);

// The power of a GPU type whose purchase price is not published, so that a
// config entry that gives only the purchase price still counts power.
struct KnownWatts {
  const char* gpu_type;
  double watts;
  const char* source;
};
// nullptr when the GPU type's power is not known.
const KnownWatts* FindKnownWatts(const std::string& gpu_type);

}  // namespace stoker::cost::internal

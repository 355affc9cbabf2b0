// The price catalog: what a machineSpec would cost per hour on Google Cloud
// (Vertex AI custom training, Compute Engine on demand, Compute Engine Spot),
// and what the same GPUs and host cost on one's own hardware.
//
// Pure: no I/O besides parsing the YAML node it is given. Every figure
// carries its source and date; a shape the catalog cannot price gets "no
// price" with the reason, never a guessed number.
//
// User documentation: docs/prices.md (keep the two in step).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "spec/custom_job.h"

namespace stoker::cost {

// One price per hour, with where it came from.
struct Rate {
  double usd_per_hour = 0;
  std::string confidence;  // A (read from Google), B (secondary), C (derived/estimated)
  std::string source;      // e.g. "S1 pricing.yml 2026-07-30"
};

// A machine type's row in one region.
struct MachinePrice {
  double vcpus = 0;
  double memory_gb = 0;
  std::string gpu_type;  // built-in accelerator ("" if none)
  int gpu_count = 0;
  std::optional<Rate> compute_engine;  // on demand, the whole VM (GPUs included)
  std::optional<Rate> spot;            // Compute Engine Spot snapshot, the whole VM
  std::optional<Rate> vertex;          // Vertex AI custom training, the whole VM
};

// An accelerator's price per GPU-hour (for GPUs attached to N1 machines).
struct AcceleratorPrice {
  std::optional<Rate> compute_engine;
  std::optional<Rate> spot;
  std::optional<Rate> vertex;
  std::vector<int> n1_counts;  // counts that attach to N1; empty = cannot attach to N1
};

// What one replica of a machineSpec costs per hour in a region.
// A figure is absent when the catalog has no price for that market; `reason`
// then says why (all three absent = "no price").
struct CloudPrice {
  std::optional<double> vertex_usd_per_hour;
  std::optional<double> compute_engine_usd_per_hour;
  std::optional<double> spot_usd_per_hour;
  std::string basis;               // how it was priced, e.g. "n1-standard-8 + 1 x NVIDIA_TESLA_T4"
  std::string confidence;          // the weakest confidence among the parts
  std::string reason;              // why a figure is missing ("" when all three are there)
  std::vector<std::string> notes;  // e.g. "Vertex sells whole GPUs: 0.25 of a GPU priced as 1"
  bool priced() const {
    return vertex_usd_per_hour || compute_engine_usd_per_hour || spot_usd_per_hour;
  }
};

// Own hardware: what a GPU or a node costs to own, per hour.
struct Asset {
  double purchase_usd = 0;
  double life_years = 3;  // straight-line amortisation
  double watts = 0;       // rated power (used when no measured energy is known)
  std::string source;     // where the default came from ("config" when set there)
};

struct OwnHardware {
  std::map<std::string, Asset> gpus;  // by Vertex accelerator type
  std::optional<Asset> node;          // the host (CPUs, memory, disks, chassis), whole node
  double usd_per_kwh = 0.15;
  double pue = 1.0;  // facility overhead on power (1.0 = none)
};

// The prices of one region.
struct RegionPrices {
  std::map<std::string, MachinePrice> machines;
  std::map<std::string, AcceleratorPrice> accelerators;
};

class Catalog {
 public:
  // The catalog shipped with Stoker: list prices for the regions Vertex AI
  // custom training runs in (sources and dates in docs/prices.md), priced in
  // us-central1 unless the config's cost.region says otherwise, and
  // own-hardware defaults for GPUs whose purchase price and power are published.
  static Catalog BuiltIn();

  // Applies the config's `cost:` section (docs/cost.md) over this catalog:
  // region (one the catalog has), machine and accelerator price overrides and
  // additions (in every region: they are the operator's own figures), own
  // hardware. InvalidArgument naming the key (e.g.
  // "cost.machines.n1-standard-4.vertex_usd_per_hour: must be a number >= 0") on malformed input;
  // nothing is applied then.
  Status Apply(const YAML::Node& cost);

  // The price of one replica of `machine` per hour in `region` (the
  // configured region() when empty). Fractional accelerator counts (Stoker's
  // GPU sharing) are priced as one whole GPU, with a note. Legacy AI Platform
  // names (standard_gpu, complex_model_m, ...) price as the Compute Engine
  // machine they were built on. A region the catalog does not have gets no
  // price, with the reason "no prices for REGION; known: ...".
  CloudPrice PriceReplica(const spec::MachineSpec& machine, const std::string& region = "") const;

  // The region that prices a job in `location` (the location of its resource
  // name): the location itself when it reads as a Google Cloud region (has a
  // dash; known to the catalog or not: an unknown one then gets no price rather
  // than another region's), else (Stoker's own locations such as "local") region().
  std::string RegionFor(const std::string& location) const;
  // InvalidArgument "FIELD: no prices for 'REGION'; known: ..." unless the
  // catalog has prices for `region`.
  Status CheckRegion(const std::string& region, const std::string& field) const;
  // The regions priced, sorted.
  std::vector<std::string> regions() const;

  // AI Platform's price of a training unit in `region`: $0.49 in the
  // Americas, $0.54 in Europe and Asia-Pacific (docs/prices.md, S5).
  static double TrainingUnitUsd(const std::string& region);

  // Own hardware per hour: `gpus` GPUs of `gpu_type` (fractions allowed)
  // amortised plus their power at `own().usd_per_kwh` × pue; nullopt with
  // `*reason` set when the GPU type has no purchase price configured.
  std::optional<double> OwnGpuUsdPerHour(const std::string& gpu_type, double gpus,
                                         std::string* reason) const;
  // The node's share per hour: `fraction` (0..1, the booked share of the
  // node's CPUs) of its amortisation and power; nullopt when no node is configured.
  std::optional<double> OwnNodeUsdPerHour(double fraction) const;

  const std::string& region() const { return region_; }
  const std::string& price_date() const { return price_date_; }
  const OwnHardware& own() const { return own_; }
  // The configured region's rows; Prices(region) another's (nullptr when not priced).
  const std::map<std::string, MachinePrice>& machines() const { return Prices(region_)->machines; }
  const std::map<std::string, AcceleratorPrice>& accelerators() const {
    return Prices(region_)->accelerators;
  }
  const RegionPrices* Prices(const std::string& region) const;

 private:
  std::string region_ = "us-central1";
  std::string price_date_;
  std::map<std::string, RegionPrices> regions_;  // never without region_
  OwnHardware own_;
};

}  // namespace stoker::cost

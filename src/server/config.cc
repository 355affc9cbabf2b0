#include "server/config.h"

#include "common/files.h"
#include "common/json_yaml.h"

namespace stoker::server {

std::vector<ImageRule> DefaultImageRules() {
  std::vector<ImageRule> rules;
  for (const char* registry :
       {"*-docker.pkg.dev/vertex-ai/training/", "gcr.io/cloud-aiplatform/training/"}) {
    for (const char* framework :
         {"pytorch-*", "tf-*", "scikit-learn-*", "sklearn-*", "xgboost-*"}) {
      rules.push_back({std::string(registry) + framework, "auto"});
    }
  }
  return rules;
}

Result<Config> LoadConfig(const std::filesystem::path& data_dir, const std::filesystem::path& file,
                          bool file_is_explicit) {
  Config c;
  c.data_dir = data_dir;
  std::vector<ImageRule> user_rules;
  auto text = ReadFile(file);
  if (!text.ok()) {
    if (file_is_explicit) return NotFound("config file " + file.string() + " cannot be read");
  } else {
    c.config_file = file;
    STOKER_ASSIGN_OR_RETURN(nlohmann::json j, ParseYamlOrJson(*text, file.string()));
    if (j.is_null()) j = nlohmann::json::object();
    if (!j.is_object()) return InvalidArgument(file.string() + ": the config must be a mapping");
    std::string where = file.string() + ": ";
    try {
      for (auto& [key, value] : j.items()) {
        if (key == "listen") {
          c.listen = value.get<std::string>();
        } else if (key == "images") {
          for (size_t i = 0; i < value.size(); ++i) {
            const auto& r = value[i];
            if (!r.contains("match") || !r.contains("python")) {
              return InvalidArgument(
                  where + "images[" + std::to_string(i) +
                  "]: needs 'match' (an image glob) and 'python' (a path or auto)");
            }
            user_rules.push_back({r["match"].get<std::string>(), r["python"].get<std::string>()});
          }
        } else if (key == "buckets") {
          for (auto& [name, path] : value.items()) c.buckets[name] = path.get<std::string>();
        } else if (key == "inventory") {
          resources::Node node = resources::DetectLocalNode();
          if (value.contains("cpus")) node.cpus = value["cpus"].get<double>();
          if (value.contains("memory_gb")) {
            node.memory_bytes =
                static_cast<uint64_t>(value["memory_gb"].get<double>() * (1ull << 30));
          }
          int index = 0;
          for (const auto& g : value.value("gpus", nlohmann::json::array())) {
            resources::Gpu gpu;
            gpu.index = index++;
            gpu.type = g.at("type").get<std::string>();
            gpu.memory_bytes =
                g.contains("memory_gb")
                    ? static_cast<uint64_t>(g["memory_gb"].get<double>() * (1ull << 30))
                    : resources::AcceleratorMemoryBytes(gpu.type);
            node.gpus.push_back(gpu);
          }
          c.inventory = node;
        } else if (key == "cpu_oversubscription") {
          c.cpu_oversubscription = value.get<double>();
          if (c.cpu_oversubscription < 1) {
            return InvalidArgument(where + "cpu_oversubscription: must be at least 1");
          }
        } else if (key == "accelerator_substitution") {
          c.accelerator_substitution = value.get<bool>();
        } else if (key == "cancel_grace_seconds") {
          c.cancel_grace_seconds = value.get<double>();
        } else if (key == "poll_interval_ms") {
          c.poll_interval_ms = value.get<int>();
        } else if (key == "nfs_mount_root") {
          c.nfs_mount_root = value.get<std::string>();
        } else {
          return InvalidArgument(where + "unknown key '" + key +
                                 "' (known: listen, images, buckets, inventory, "
                                 "cpu_oversubscription, accelerator_substitution, "
                                 "cancel_grace_seconds, poll_interval_ms, nfs_mount_root)");
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(where + "wrong type of value: " + e.what());
    }
  }
  c.images = user_rules;
  for (ImageRule& r : DefaultImageRules()) c.images.push_back(std::move(r));
  return c;
}

}  // namespace stoker::server

// ModelRegistry states and ModelRepository: name resolution (no escapes),
// background loads, failed loads keeping the previous state, unload waiting
// for in-flight holders.
#include "lib/serving/model_repository.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <future>
#include <thread>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A repository with "good" (stories260K .bin form), "also_good" (the HF
// form) and "broken" (bad config.json), plus a link escaping the root.
class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir() + "/repo";
    fs::create_directories(root_ + "/good");
    fs::copy_file(testing::Stories260KBin(), root_ + "/good/good.bin");
    fs::create_directories(root_ + "/also_good");
    fs::copy(testing::Stories260KHfDir(), root_ + "/also_good");
    fs::create_directories(root_ + "/broken");
    std::ofstream(root_ + "/broken/config.json") << "{\"model_type\": 3}";
    std::ofstream(root_ + "/broken/model.safetensors") << "xx";
    fs::create_directory_symlink(testing::Stories260KHfDir(), root_ + "/escape");
    fs::create_directories(root_ + "/../outside");
  }
  std::unique_ptr<ModelRepository> Make(ModelRepository::ModelFactory factory = nullptr) {
    ModelRepository::Options options;
    options.root = root_;
    options.registry = &registry_;
    options.factory = std::move(factory);
    auto repo = ModelRepository::Create(options);
    EXPECT_TRUE(repo.ok()) << repo.status();
    return std::move(*repo);
  }
  std::string root_;
  ModelRegistry registry_;
};

TEST_F(RepositoryTest, NamesOnly) {
  auto repo = Make();
  for (const std::string bad : {"", ".", "..", "../outside", "/etc", "good/../good", "a\\b"}) {
    auto r = repo->Resolve(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto escape = repo->Resolve("escape");
  ASSERT_FALSE(escape.ok());
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(escape.status().message(), HasSubstr("outside the model repository"));
  auto missing = repo->Resolve("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("available: [also_good, broken, escape, good]"));
  auto good = repo->Resolve("good");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_THAT(*good, HasSubstr("/repo/good"));
}

// An empty folder is no model: not listed (issue 25: it was AVAILABLE).
// LoadModel of it by name still says what the loader misses.
TEST_F(RepositoryTest, EmptyFolderIsNotAvailable) {
  fs::create_directories(root_ + "/empty");
  auto repo = Make();
  EXPECT_EQ(repo->Available(), (std::vector<std::string>{"also_good", "broken", "escape", "good"}));
  auto empty = repo->Resolve("empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  std::ofstream(root_ + "/empty/notes.txt") << "soon\n";
  EXPECT_EQ(repo->Available(),
            (std::vector<std::string>{"also_good", "broken", "empty", "escape", "good"}));
}

TEST_F(RepositoryTest, NoRepositoryIsFailedPrecondition) {
  ModelRepository::Options options;
  options.registry = &registry_;
  auto repo = ModelRepository::Create(options);
  ASSERT_TRUE(repo.ok());
  EXPECT_EQ((*repo)->Resolve("good").status().code(), absl::StatusCode::kFailedPrecondition);
  options.root = root_ + "/good/good.bin";
  EXPECT_EQ(ModelRepository::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RepositoryTest, LoadRunsOffTheCallerAndShowsLoading) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto repo = Make([gate](const std::string& name, const std::string& path) {
    gate.wait();  // the load is held until the test releases it
    Model::Options o;
    o.name = name;
    o.path = path;
    return Model::Create(o);
  });
  std::promise<absl::StatusOr<std::shared_ptr<const Model>>> result;
  repo->LoadAsync("good", [&](absl::StatusOr<std::shared_ptr<const Model>> m) {
    result.set_value(std::move(m));
  });
  // LoadAsync returned while the load is blocked: LOADING, not servable.
  auto status = registry_.Status("good");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, ModelState::kLoading);
  EXPECT_EQ(registry_.Get("good").status().code(), absl::StatusCode::kUnavailable);
  // A second load of the same name is refused while the first runs.
  absl::Status second;
  repo->LoadAsync("good", [&](absl::StatusOr<std::shared_ptr<const Model>> m) {
    second = m.status();
  });
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  release.set_value();
  auto loaded = result.get_future().get();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(registry_.Status("good")->state, ModelState::kReady);
  EXPECT_TRUE(registry_.Get("good").ok());
  EXPECT_TRUE(registry_.Get("").ok());  // first model is the default
}

TEST_F(RepositoryTest, FailedLoadReportsWhyAndKeepsPreviousVersion) {
  auto repo = Make();
  auto broken = repo->Load("broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(broken.status().message(), HasSubstr("broken/config.json"));
  auto status = registry_.Status("broken");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, ModelState::kFailed);
  EXPECT_THAT(status->reason, HasSubstr("key \"model_type\" must be a string"));
  EXPECT_EQ(registry_.Get("broken").status().code(), absl::StatusCode::kFailedPrecondition);

  // Reload of a READY model that fails keeps the old version serving.
  auto first = repo->Load("also_good");
  ASSERT_TRUE(first.ok()) << first.status();
  std::ofstream(root_ + "/also_good/config.json") << "{";
  auto reload = repo->Load("also_good");
  ASSERT_FALSE(reload.ok());
  EXPECT_THAT(reload.status().message(), HasSubstr("not valid JSON"));
  auto still = registry_.Get("also_good");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->get(), first->get());
  EXPECT_EQ(registry_.Status("also_good")->state, ModelState::kReady);
}

TEST_F(RepositoryTest, UnloadWaitsForInFlightHolders) {
  auto repo = Make();
  ASSERT_TRUE(repo->Load("good").ok());
  std::shared_ptr<const Model> in_flight = *registry_.Get("good");
  std::promise<absl::Status> done;
  repo->UnloadAsync("good", [&](absl::Status s) { done.set_value(s); });
  auto future = done.get_future();
  // New calls no longer find it; the unload waits for the held reference.
  EXPECT_EQ(registry_.Get("good").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.Status("good")->state, ModelState::kUnloading);
  EXPECT_EQ(future.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  // The in-flight call still works.
  EmbedInput in;
  in.token_ids = {{1, 2}};
  EmbedOutput out;
  EXPECT_TRUE(in_flight->Embed(in, &out).ok());
  in_flight.reset();
  EXPECT_TRUE(future.get().ok());
  EXPECT_EQ(registry_.Status("good").status().code(), absl::StatusCode::kNotFound);
  // Unknown names.
  absl::Status unknown;
  repo->UnloadAsync("good", [&](absl::Status s) { unknown = s; });
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
}

TEST_F(RepositoryTest, UnloadOfFailedEntryRemovesIt) {
  auto repo = Make();
  ASSERT_FALSE(repo->Load("broken").ok());
  std::promise<absl::Status> done;
  repo->UnloadAsync("broken", [&](absl::Status s) { done.set_value(s); });
  EXPECT_TRUE(done.get_future().get().ok());
  EXPECT_FALSE(registry_.Status("broken").ok());
}

// A load that cannot finish (a factory stuck in the kernel) must not hold
// the destructor, i.e. the server's exit after a drain: past stop_timeout it
// is abandoned and, when it ends later, reports to nobody.
TEST_F(RepositoryTest, DestructorAbandonsALoadStuckPastStopTimeout) {
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> opened = gate->get_future().share();
  std::atomic<bool> done_called{false};
  std::atomic<bool> factory_returned{false};
  {
    ModelRepository::Options options;
    options.root = root_;
    options.registry = &registry_;
    options.stop_timeout = std::chrono::milliseconds(50);
    options.factory = [opened, &factory_returned](const std::string&, const std::string&)
        -> absl::StatusOr<std::unique_ptr<Model>> {
      opened.wait();
      factory_returned = true;
      return absl::UnavailableError("never served");
    };
    auto repo = ModelRepository::Create(options);
    ASSERT_TRUE(repo.ok()) << repo.status();
    (*repo)->LoadAsync("good", [&](absl::StatusOr<std::shared_ptr<const Model>>) {
      done_called = true;
    });
    EXPECT_EQ(registry_.Status("good")->state, ModelState::kLoading);
    const auto start = std::chrono::steady_clock::now();
    repo->reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  }
  gate->set_value();
  ASSERT_TRUE(testing::WaitFor([&] { return factory_returned.load(); },
                               std::chrono::milliseconds(5000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(done_called);
  EXPECT_EQ(registry_.Status("good")->state, ModelState::kLoading);  // nobody reported
}

// The repository confines each load's file opens to its root: a model
// directory whose config.json links out of it fails with INVALID_ARGUMENT.
TEST_F(RepositoryTest, LoadOfAFileLinkedOutOfTheRootFails) {
  fs::create_directories(root_ + "/linked");
  fs::create_symlink(testing::Stories260KHfDir() + "/config.json", root_ + "/linked/config.json");
  fs::copy_file(testing::Stories260KHfDir() + "/model.safetensors",
                root_ + "/linked/model.safetensors");
  auto repo = Make();
  auto model = repo->Load("linked");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("outside the model repository root"));
  EXPECT_TRUE(repo->Load("good").ok());
}

}  // namespace
}  // namespace vocabd

// Event files built here byte by byte (protobuf wire format and TFRecord
// framing written out, not generated), so each test states the format rule
// it relies on.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "tfevents/crc32c.h"
#include "tfevents/event_dir.h"
#include "tfevents/event_file.h"

namespace stoker::tfevents {
namespace {

namespace fs = std::filesystem;

// ---- a tiny protobuf and TFRecord writer ----

std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string Key(int field, int wire) { return Varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string Le(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string Len(int field, const std::string& body) {
  return Key(field, 2) + Varint(body.size()) + body;
}
std::string Float(int field, float f) { return Key(field, 5) + Le(std::bit_cast<uint32_t>(f), 4); }
std::string Double(int field, double d) {
  return Key(field, 1) + Le(std::bit_cast<uint64_t>(d), 8);
}

std::string Event(double wall_time, int64_t step, const std::string& summary_values) {
  return Double(1, wall_time) + Key(2, 0) + Varint(static_cast<uint64_t>(step)) +
         Len(5, summary_values);
}
std::string FileVersion() { return Double(1, 1764139200.0) + Len(3, "brain.Event:2"); }
// Summary.value with simple_value (PyTorch's SummaryWriter, tensorboardX).
std::string SimpleValue(const std::string& tag, float v) {
  return Len(1, Len(1, tag) + Float(2, v));
}
std::string ScalarsMetadata() { return Len(9, Len(1, Len(1, "scalars"))); }
// TF2 tf.summary.scalar: a rank-0 tensor (no tensor_shape dims).
std::string TensorValue(const std::string& tag, const std::string& tensor, bool metadata = true) {
  return Len(1, Len(1, tag) + (metadata ? ScalarsMetadata() : "") + Len(8, tensor));
}
std::string FloatContent(float v) {
  return Key(1, 0) + Varint(1) + Len(2, "") + Len(4, Le(std::bit_cast<uint32_t>(v), 4));
}
std::string DoubleContent(double v) {
  return Key(1, 0) + Varint(2) + Len(2, "") + Len(4, Le(std::bit_cast<uint64_t>(v), 8));
}
std::string PackedFloatVal(float v) {
  return Key(1, 0) + Varint(1) + Len(5, Le(std::bit_cast<uint32_t>(v), 4));
}
std::string UnpackedFloatVal(float v) { return Key(1, 0) + Varint(1) + Float(5, v); }
std::string DoubleVal(double v) { return Key(1, 0) + Varint(2) + Double(6, v); }

std::string Record(const std::string& data) {
  std::string len = Le(data.size(), 8);
  return len + Le(MaskCrc(Crc32c(len)), 4) + data + Le(MaskCrc(Crc32c(data)), 4);
}

FileState ReadAll(const std::string& bytes, Limits limits = {}) {
  FileState state;
  ReadRecords(StringSource(bytes), limits, state);
  return state;
}

std::vector<double> Values(const FileState& s, const std::string& tag) {
  std::vector<double> out;
  auto it = s.series.find(tag);
  if (it == s.series.end()) return out;
  for (const Point& p : it->second.Points()) out.push_back(p.value);
  return out;
}

// ---- CRC ----

TEST(Crc32cTest, MaskRotatesRightBy15AndAddsTheConstant) {
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc(0x00008000u), 0xa282ead8u + 1);
  EXPECT_EQ(MaskCrc(0xffffffffu), 0xffffffffu + 0xa282ead8u);  // wraps in 32 bits
}

// ---- records and events ----

TEST(EventFileTest, ReadsSimpleValueScalarsWithStepAndWallTime) {
  std::string f = Record(FileVersion()) +
                  Record(Event(1764139200.5, 1, SimpleValue("loss", 0.5f))) +
                  Record(Event(1764139201.5, 2, SimpleValue("loss", 0.25f)));
  FileState s = ReadAll(f);
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(s.offset, f.size());
  std::vector<Point> p = s.series.at("loss").Points();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].step, 1);
  EXPECT_DOUBLE_EQ(p[0].wall_time, 1764139200.5);
  EXPECT_DOUBLE_EQ(p[0].value, 0.5);
  EXPECT_EQ(p[1].step, 2);
  EXPECT_DOUBLE_EQ(p[1].value, 0.25);
  EXPECT_TRUE(s.problems.empty());
}

TEST(EventFileTest, ReadsTf2TensorScalarsInEveryEncoding) {
  std::string f = Record(FileVersion()) +
                  Record(Event(1, 1, TensorValue("content_f", FloatContent(1.5f)))) +
                  Record(Event(1, 1, TensorValue("content_d", DoubleContent(2.25)))) +
                  Record(Event(1, 1, TensorValue("packed_f", PackedFloatVal(3.5f)))) +
                  Record(Event(1, 1, TensorValue("unpacked_f", UnpackedFloatVal(4.5f)))) +
                  Record(Event(1, 1, TensorValue("double_val", DoubleVal(5.125))));
  FileState s = ReadAll(f);
  EXPECT_EQ(Values(s, "content_f"), std::vector<double>{1.5});
  EXPECT_EQ(Values(s, "content_d"), std::vector<double>{2.25});
  EXPECT_EQ(Values(s, "packed_f"), std::vector<double>{3.5});
  EXPECT_EQ(Values(s, "unpacked_f"), std::vector<double>{4.5});
  EXPECT_EQ(Values(s, "double_val"), std::vector<double>{5.125});
}

TEST(EventFileTest, ATagsPluginFromItsFirstValueDecidesItsLaterTensors) {
  // TensorBoard writers put metadata on a tag's first value only.
  std::string hparams =
      Len(1, Len(1, "hp") + Len(9, Len(1, Len(1, "hparams"))) + Len(8, FloatContent(9.0f)));
  std::string f = Record(Event(1, 1, TensorValue("acc", FloatContent(0.5f)))) +
                  Record(Event(2, 2, TensorValue("acc", FloatContent(0.75f), false))) +
                  Record(Event(1, 1, hparams)) +
                  Record(Event(2, 2, TensorValue("hp", FloatContent(1.0f), false)));
  FileState s = ReadAll(f);
  EXPECT_EQ(Values(s, "acc"), (std::vector<double>{0.5, 0.75}));
  EXPECT_FALSE(s.series.count("hp"));
}

TEST(EventFileTest, TensorsThatAreNotOneNumberAreNotScalars) {
  std::string shape_2 = Len(2, Len(2, Key(1, 0) + Varint(2)));  // dim {size: 2}
  std::string vector = Key(1, 0) + Varint(1) + shape_2 + Len(5, Le(0, 4) + Le(0, 4));
  std::string text = Key(1, 0) + Varint(7) + Len(8, "hello");  // DT_STRING
  std::string f =
      Record(Event(1, 1, TensorValue("v", vector))) + Record(Event(1, 1, TensorValue("t", text)));
  FileState s = ReadAll(f);
  EXPECT_TRUE(s.series.empty());
  EXPECT_TRUE(s.problems.empty());
}

TEST(EventFileTest, KeepsSeveralTagsOfOneEventApart) {
  std::string f = Record(Event(
      1, 7,
      SimpleValue("loss", 1) + SimpleValue("acc", 0.5f) + TensorValue("lr", DoubleContent(0.001))));
  FileState s = ReadAll(f);
  ASSERT_EQ(s.series.size(), 3u);
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});
  EXPECT_EQ(Values(s, "acc"), std::vector<double>{0.5});
  EXPECT_EQ(Values(s, "lr"), std::vector<double>{0.001});
  EXPECT_EQ(s.series.at("lr").Points()[0].step, 7);
}

TEST(EventFileTest, ATruncatedTailStopsCleanlyAndIsReadOnceComplete) {
  std::string full =
      Record(Event(1, 1, SimpleValue("loss", 1))) + Record(Event(2, 2, SimpleValue("loss", 2)));
  const size_t first = Record(Event(1, 1, SimpleValue("loss", 1))).size();
  for (size_t cut : {first + 5, first + 12, full.size() - 1}) {
    FileState s;
    ReadRecords(StringSource(std::string_view(full).substr(0, cut)), {}, s);
    EXPECT_TRUE(s.error.empty()) << "cut at " << cut << ": " << s.error;
    EXPECT_EQ(s.offset, first);
    EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});
    ReadRecords(StringSource(full), {}, s);  // the writer finished the record
    EXPECT_EQ(Values(s, "loss"), (std::vector<double>{1, 2}));
    EXPECT_EQ(s.offset, full.size());
  }
}

TEST(EventFileTest, ACorruptLengthCrcStopsTheFileThereWithAReason) {
  std::string good = Record(Event(1, 1, SimpleValue("loss", 1)));
  std::string bad = Record(Event(2, 2, SimpleValue("loss", 2)));
  bad[9] ^= 0x01;  // in the length's CRC
  FileState s = ReadAll(good + bad + good);
  EXPECT_EQ(s.error, "record 2 (byte " + std::to_string(good.size()) + "): length CRC mismatch");
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});  // what came before is kept
  FileState again = s;
  ReadRecords(StringSource(good + bad + good), {}, again);  // and it stays stopped
  EXPECT_EQ(again.offset, s.offset);
}

TEST(EventFileTest, ACorruptDataCrcStopsTheFileThereWithAReason) {
  std::string good = Record(Event(1, 1, SimpleValue("loss", 1)));
  std::string bad = Record(Event(2, 2, SimpleValue("loss", 2)));
  bad[bad.size() - 6] ^= 0x40;  // in the float, under the data CRC
  FileState s = ReadAll(good + bad + good);
  EXPECT_EQ(s.error, "record 2 (byte " + std::to_string(good.size()) + "): data CRC mismatch");
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});
}

TEST(EventFileTest, AHugeLengthIsNeitherBelievedNorAllocated) {
  std::string len = Le(1ull << 62, 8);
  std::string f = len + Le(MaskCrc(Crc32c(len)), 4) + "xxxx";
  FileState s = ReadAll(f);
  EXPECT_NE(s.error.find("record 1 (byte 0): length 4611686018427387904 is over the"),
            std::string::npos)
      << s.error;
  // A length under the hard bound but past the end: a record still being
  // written, waited for without reading or allocating it.
  std::string len2 = Le(512ull << 20, 8);
  FileState waiting = ReadAll(len2 + Le(MaskCrc(Crc32c(len2)), 4) + "xxxx");
  EXPECT_TRUE(waiting.error.empty());
  EXPECT_EQ(waiting.offset, 0u);
}

TEST(EventFileTest, RecordsOverTheReadBoundAreSteppedOverUnread) {
  Limits limits;
  limits.max_record_bytes = 64;
  std::string big = Record(Event(1, 1, SimpleValue(std::string(100, 'x'), 1)));
  std::string f = big + Record(Event(2, 2, SimpleValue("loss", 2)));
  FileState s = ReadAll(f, limits);
  EXPECT_TRUE(s.error.empty());
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{2});
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_NE(s.problems[0].find("larger than 64 bytes were not read"), std::string::npos);
}

TEST(EventFileTest, GarbageProtobufUnderAValidCrcIsLeftOutAndTheFileGoesOn) {
  std::string f = Record("\xff\xff\xff") +                      // a key that never ends
                  Record(Key(5, 2) + Varint(1000) + "short") +  // a length past the end
                  Record(Key(1, 0) + Varint(1)) +               // wall_time as a varint
                  Record(Key(5, 3)) +                           // a group
                  Record(Event(1, 1, SimpleValue("loss", 1)));
  FileState s = ReadAll(f);
  EXPECT_TRUE(s.error.empty());
  EXPECT_EQ(s.records, 5u);
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});
  ASSERT_EQ(s.problems.size(), 1u);  // one problem per kind, naming the first
  EXPECT_NE(s.problems[0].find("not TensorBoard events were left out (the first: record 1"),
            std::string::npos)
      << s.problems[0];
}

TEST(EventFileTest, HostileTagsAreCleanedBoundedOrLeftOut) {
  Limits limits;
  limits.max_tags = 3;
  std::string f = Record(Event(1, 1, SimpleValue("lo\x1b[31mss\n", 1))) +  // escape, newline
                  Record(Event(1, 1, SimpleValue("bad\xff\xfe", 2))) +     // not UTF-8
                  Record(Event(1, 1, SimpleValue("\x01\x02", 3))) +        // nothing printable
                  Record(Event(1, 1, SimpleValue(std::string(300, 'a'), 4))) +
                  Record(Event(1, 1, SimpleValue("caf\xc3\xa9", 5))) +  // UTF-8 is fine
                  Record(Event(1, 1, SimpleValue("fourth", 6)));
  FileState s = ReadAll(f, limits);
  EXPECT_EQ(Values(s, "lo[31mss"), std::vector<double>{1});
  EXPECT_EQ(Values(s, "bad??"), std::vector<double>{2});
  EXPECT_EQ(Values(s, "caf\xc3\xa9"), std::vector<double>{5});
  EXPECT_EQ(s.series.size(), 3u);
  std::string all;
  for (const std::string& p : s.problems) all += p + "\n";
  EXPECT_NE(all.find("empty or unprintable tag"), std::string::npos) << all;
  EXPECT_NE(all.find("tags longer than 256 bytes"), std::string::npos) << all;
  EXPECT_NE(all.find("more than 3 tags"), std::string::npos) << all;
}

TEST(EventFileTest, NonFiniteValuesAreLeftOutAndTheFirstIsNamed) {
  std::string f = Record(Event(1, 1, SimpleValue("loss", 1))) +
                  Record(Event(2, 2, SimpleValue("loss", NAN))) +
                  Record(Event(3, 3, SimpleValue("loss", INFINITY))) +
                  Record(Event(4, 4, TensorValue("loss", DoubleContent(-INFINITY))));
  FileState s = ReadAll(f);
  EXPECT_EQ(Values(s, "loss"), std::vector<double>{1});
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_EQ(s.problems[0],
            "tag 'loss': non-finite values (NaN or infinity) were left out, the first at step 2");
}

TEST(EventFileTest, TheReadBoundStopsBetweenRecordsAndTheNextCallGoesOn) {
  std::string r = Record(Event(1, 1, SimpleValue("loss", 1)));
  std::string f = r + r + r;
  Limits limits;
  limits.max_read_bytes = r.size() + 1;
  FileState s;
  ReadRecords(StringSource(f), limits, s);
  EXPECT_EQ(s.records, 1u);
  ReadRecords(StringSource(f), limits, s);
  ReadRecords(StringSource(f), limits, s);
  EXPECT_EQ(s.records, 3u);
  EXPECT_EQ(s.series.at("loss").seen(), 3u);
}

TEST(SeriesTest, KeepsAnEvenSpreadAndTheLastPoint) {
  Series s;
  for (int i = 0; i < 10001; ++i) s.Add({i, 0, static_cast<double>(i)}, 100);
  std::vector<Point> p = s.Points();
  EXPECT_LE(p.size(), 201u);
  EXPECT_GE(p.size(), 100u);
  EXPECT_EQ(p.front().step, 0);
  EXPECT_EQ(p.back().step, 10000);
  // Evenly spread: the gaps between kept points are all the same stride.
  int64_t gap = p[1].step - p[0].step;
  for (size_t i = 1; i + 1 < p.size(); ++i) EXPECT_EQ(p[i].step - p[i - 1].step, gap);
  std::vector<Point> d = Downsample(p, 50);
  EXPECT_EQ(d.size(), 50u);
  EXPECT_EQ(d.front().step, 0);
  EXPECT_EQ(d.back().step, 10000);
}

// ---- directories ----

class EventDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "train");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const fs::path& rel, const std::string& bytes, bool append = false) {
    std::ofstream(dir_ / rel, append ? std::ios::app | std::ios::binary : std::ios::binary)
        << bytes;
  }
  fs::path dir_ = fs::temp_directory_path() / ("tfevents_test_" + std::to_string(getpid()));
};

TEST_F(EventDirTest, NamesSeriesByRunDirectoryAndReadsGrowingFilesOnwards) {
  Write("events.out.tfevents.1.host",
        Record(FileVersion()) + Record(Event(10, 1, SimpleValue("loss", 1))));
  Write("train/events.out.tfevents.2.host", Record(Event(10, 1, SimpleValue("loss", 3))));
  Write("notes.txt", "not an event file");
  EventDirReader reader;
  DirScalars d = reader.Read(dir_);
  ASSERT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[0].name, "loss");
  EXPECT_EQ(d.series[1].name, "train/loss");
  EXPECT_TRUE(d.skipped.empty());

  Write("events.out.tfevents.1.host", Record(Event(11, 2, SimpleValue("loss", 0.5f))), true);
  d = reader.Read(dir_);
  ASSERT_EQ(d.series[0].points.size(), 2u);
  EXPECT_EQ(d.series[0].points[1].step, 2);
  EXPECT_DOUBLE_EQ(d.series[0].points[1].value, 0.5);
}

TEST(EventFileWriterTest, NamesTheHostAndProcessOfTheUsualFileNames) {
  // TF2 (.v2), PyTorch and tensorboardX: <seconds>.<host>.<pid>.<n>.
  EXPECT_EQ(EventFileWriter("events.out.tfevents.1732000000.node-1.lab.4242.0.v2"),
            "node-1.lab pid 4242");
  EXPECT_EQ(EventFileWriter("events.out.tfevents.1732000000.node-1.4243.7"), "node-1 pid 4243");
  EXPECT_EQ(EventFileWriter("events.out.tfevents.1732000000.node-1"), "node-1");  // TF1
  EXPECT_EQ(EventFileWriter("events.out.tfevents.1732000000"), "");
  EXPECT_EQ(EventFileWriter("notes.txt"), "");
}

TEST(KnownWriterNameTest, NamesTheReplicaWhoseTrainerWroteTheFile) {
  const std::vector<KnownWriter> replicas = {{"workerpool0-0", "node-1", 4242},
                                             {"workerpool1-0", "node-1", 4243},
                                             {"workerpool1-1", "node-2.lab", 4242}};
  EXPECT_EQ(KnownWriterName("node-1 pid 4242", replicas), "workerpool0-0");
  EXPECT_EQ(KnownWriterName("node-1 pid 4243", replicas), "workerpool1-0");
  // A short host name and a full one are the same host, in any case.
  EXPECT_EQ(KnownWriterName("node-1.lab pid 4243", replicas), "workerpool1-0");
  EXPECT_EQ(KnownWriterName("NODE-2 pid 4242", replicas), "workerpool1-1");
  // The dotted host is parsed whole (EventFileWriter keeps its dots).
  EXPECT_EQ(
      KnownWriterName(EventFileWriter("events.out.tfevents.1.node-2.lab.4242.0.v2"), replicas),
      "workerpool1-1");
}

TEST(KnownWriterNameTest, KeepsTheProcessNameWhenNoOneReplicaMatches) {
  const std::vector<KnownWriter> replicas = {{"workerpool0-0", "node-1", 4242}};
  EXPECT_EQ(KnownWriterName("node-1 pid 4250", replicas), "");  // a child of the trainer
  EXPECT_EQ(KnownWriterName("node-9 pid 4242", replicas), "");  // another host
  EXPECT_EQ(KnownWriterName("node-1.a pid 4242", {{"r", "node-1.b", 4242}}), "");
  EXPECT_EQ(KnownWriterName("node-1", replicas), "");  // no pid in the file name
  EXPECT_EQ(KnownWriterName("", replicas), "");
  EXPECT_EQ(KnownWriterName("node-1 pid 42x", replicas), "");
  EXPECT_EQ(KnownWriterName("node-1 pid 4242", {}), "");
}

TEST(KnownWriterNameTest, MatchesAnyHostWhenTheReplicasHostIsNotKnownButOnlyOnce) {
  // Slurm places replicas itself: the daemon knows their pids, not their nodes.
  EXPECT_EQ(
      KnownWriterName("gpu7 pid 100", {{"workerpool0-0", "", 100}, {"workerpool1-0", "", 200}}),
      "workerpool0-0");
  // One pid on two nodes: either could have written it, so neither name is used.
  EXPECT_EQ(
      KnownWriterName("gpu7 pid 100", {{"workerpool0-0", "", 100}, {"workerpool1-0", "", 100}}),
      "");
  // The same replica known twice (listed once per source) is still one.
  EXPECT_EQ(
      KnownWriterName("gpu7 pid 100", {{"workerpool0-0", "", 100}, {"workerpool0-0", "gpu7", 100}}),
      "workerpool0-0");
}

TEST_F(EventDirTest, ThreeReplicasWritingOneDirectoryAreThreeSeriesNotOneZigzag) {
  // Three processes on one host log the same steps with their own values.
  for (int r = 0; r < 3; ++r) {
    std::string bytes;
    for (int step = 1; step <= 4; ++step) {
      bytes += Record(Event(100 + step, step, SimpleValue("loss", 10 * r + step)));
    }
    Write("events.out.tfevents.1732000000.node." + std::to_string(100 + r) + ".0.v2", bytes);
  }
  // A second file of the first process (it reopened its writer) is the same writer.
  Write("events.out.tfevents.1732000100.node.100.1.v2",
        Record(Event(105, 5, SimpleValue("loss", 5))));
  DirScalars d = EventDirReader().Read(dir_);
  ASSERT_EQ(d.series.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const NamedSeries& s = d.series[r];
    EXPECT_EQ(s.name, "loss");
    EXPECT_EQ(s.writer, "node pid " + std::to_string(100 + r));
    ASSERT_EQ(s.points.size(), r == 0 ? 5u : 4u);
    for (size_t i = 0; i < s.points.size(); ++i) {
      EXPECT_EQ(s.points[i].step, static_cast<int64_t>(i + 1));  // one point per step, in order
      EXPECT_DOUBLE_EQ(s.points[i].value, 10 * r + static_cast<double>(i + 1));
    }
  }
}

TEST_F(EventDirTest, ACorruptFileIsSkippedWithItsReasonAndTheOthersAreRead) {
  std::string bad = Record(Event(1, 1, SimpleValue("acc", 1)));
  bad[bad.size() - 1] ^= 0x7f;
  Write("events.out.tfevents.bad", bad);
  Write("events.out.tfevents.good", Record(Event(1, 1, SimpleValue("loss", 1))));
  DirScalars d = EventDirReader().Read(dir_);
  ASSERT_EQ(d.series.size(), 1u);
  EXPECT_EQ(d.series[0].name, "loss");
  ASSERT_EQ(d.skipped.size(), 1u);
  EXPECT_EQ(d.skipped[0].file, "events.out.tfevents.bad");
  EXPECT_EQ(d.skipped[0].reason, "record 1 (byte 0): data CRC mismatch");
}

TEST_F(EventDirTest, NeverFollowsLinksOrOpensFifos) {
  fs::path outside = dir_.string() + "_outside";
  fs::create_directories(outside);
  std::ofstream(outside / "events.out.tfevents.x") << Record(Event(1, 1, SimpleValue("x", 1)));
  fs::create_directory_symlink(outside, dir_ / "linked");
  fs::create_symlink(outside / "events.out.tfevents.x", dir_ / "events.out.tfevents.link");
  ASSERT_EQ(::mkfifo((dir_ / "events.out.tfevents.fifo").c_str(), 0600), 0);
  DirScalars d = EventDirReader().Read(dir_);  // returns: nothing blocks on the FIFO
  EXPECT_TRUE(d.series.empty());
  DirScalars through = EventDirReader().Read(dir_ / "linked");  // the log dir itself a link
  EXPECT_TRUE(through.series.empty());
  ASSERT_EQ(through.skipped.size(), 1u);
  EXPECT_NE(through.skipped[0].reason.find("not followed"), std::string::npos);
  fs::remove_all(outside);
}

TEST_F(EventDirTest, AMissingDirectoryIsNoSeriesAndNoError) {
  DirScalars d = EventDirReader().Read(dir_ / "nope");
  EXPECT_TRUE(d.series.empty());
  EXPECT_TRUE(d.skipped.empty());
}

TEST_F(EventDirTest, BoundsTheFilesRead) {
  DirLimits limits;
  limits.max_files = 2;
  for (int i = 0; i < 4; ++i) {
    Write("events.out.tfevents." + std::to_string(i),
          Record(Event(1, 1, SimpleValue("t" + std::to_string(i), 1))));
  }
  DirScalars d = EventDirReader({}, limits).Read(dir_);
  ASSERT_EQ(d.series.size(), 2u);
  EXPECT_EQ(d.series[1].name, "t1");
  ASSERT_EQ(d.skipped.size(), 1u);
  EXPECT_EQ(d.skipped[0].reason, "more than 2 event files: only the first 2 (by path) were read");
}

}  // namespace
}  // namespace stoker::tfevents

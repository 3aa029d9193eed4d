// The query-string decoder and the request-target parser take whatever a
// client sends (issue 13, "Bad input"): a corpus of hostile inputs, and
// generated ones, none of which may throw, crash or produce a segment that
// escapes its name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "objects.hpp"
#include "request.hpp"

using namespace pvc::api;

TEST(QueryString, DecodesPercentAndPlusAndKeepsInvalidEscapes) {
    EXPECT_EQ(percent_decode("a%20b+c", true), "a b c");
    EXPECT_EQ(percent_decode("a%20b+c", false), "a b+c");
    EXPECT_EQ(percent_decode("%2Fetc%2fpasswd", false), "/etc/passwd");
    EXPECT_EQ(percent_decode("100%", true), "100%");
    EXPECT_EQ(percent_decode("%G1%1", true), "%G1%1");
    EXPECT_EQ(percent_decode("%00", true), std::string(1, '\0'));
}

TEST(QueryString, RepeatedKeysAreAListAndTheFirstValueWins) {
    Params p;
    p.parse("user_tags=a&user_tags=b&limit=web%2A&empty=&flag&=novalue&&");
    EXPECT_EQ(p.all("user_tags"), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p.get("user_tags"), "a");
    EXPECT_EQ(p.get("limit"), "web*");
    EXPECT_EQ(p.get("empty"), "");
    EXPECT_EQ(p.get("flag"), "");
    EXPECT_EQ(p.get(""), "novalue");
    EXPECT_FALSE(p.get("absent"));
    // The query string is parsed first: it wins over the form body.
    p.parse("limit=form");
    EXPECT_EQ(p.get("limit"), "web*");
}

TEST(QueryString, BooleansAreStrtoboolAndAnythingElseIsFalse) {
    for (const char* t : {"y", "YES", "t", "True", "on", "1"}) EXPECT_TRUE(truthy(std::string(t))) << t;
    for (const char* f : {"n", "no", "false", "off", "0", "", "maybe", "2"}) EXPECT_FALSE(truthy(std::string(f))) << f;
    EXPECT_FALSE(truthy(std::nullopt));
}

TEST(RequestTarget, SplitsBelowTheApiPrefixBeforeDecoding) {
    auto t = parse_target("/api/v1/vm/web%2F..%2Fx/state?wait=true");
    ASSERT_TRUE(t.under_api);
    EXPECT_EQ(t.segments, (std::vector<std::string>{"vm", "web/../x", "state"}));
    EXPECT_EQ(t.query, "wait=true");
    EXPECT_TRUE(parse_target("/api/v1").segments.empty());
    EXPECT_TRUE(parse_target("/api/v1/").segments.empty());
    EXPECT_EQ(parse_target("/api/v1/node/").segments, (std::vector<std::string>{"node", ""}));
    EXPECT_FALSE(parse_target("/api/v10/node").under_api);
    EXPECT_FALSE(parse_target("/etc/passwd").under_api);
    EXPECT_FALSE(parse_target("").under_api);
    EXPECT_EQ(parse_target("/api/v1/vm?a=1#frag").query, "a=1");
}

namespace {
void check_one(const std::string& input) {
    Params p;
    p.parse(input);
    for (const auto& [k, v] : p.pairs()) {
        EXPECT_LE(k.size(), input.size());
        EXPECT_LE(v.size(), input.size());
    }
    auto t = parse_target(input);
    size_t total = 0;
    for (const auto& s : t.segments) total += s.size();
    EXPECT_LE(total, input.size());
    // Every document built from such input serializes (invalid UTF-8 replaced).
    Json j = Json::object();
    for (const auto& [k, v] : p.pairs()) j[k] = v;
    for (const auto& s : t.segments) j["seg"].push_back(s);
    EXPECT_NO_THROW(dump(j));
}
}  // namespace

TEST(RequestCorpus, EveryCorpusEntryParsesWithoutThrowing) {
    auto dir = std::filesystem::path(PVC_API_CORPUS_DIR);
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::ifstream in(e.path(), std::ios::binary);
        std::string line;
        while (std::getline(in, line)) {
            SCOPED_TRACE(e.path().filename().string() + ": " + line);
            check_one(line);
            ++n;
        }
    }
    EXPECT_GT(n, 20);
}

TEST(RequestCorpus, RandomBytesNeverThrow) {
    std::mt19937 gen(13);
    const std::string alphabet = "%+=&?/#.;aZ09\x00\xff\xc3\x28 \t\r\n";
    for (int i = 0; i < 20000; ++i) {
        std::string s;
        int len = static_cast<int>(gen() % 64);
        for (int k = 0; k < len; ++k)
            s += (gen() % 3 == 0) ? static_cast<char>(gen() % 256) : alphabet[gen() % alphabet.size()];
        if (gen() % 2) s = "/api/v1/" + s;
        check_one(s);
    }
}

TEST(HumanSize, SmallestUnitUnderTenThousand) {
    EXPECT_EQ(human_size(0), "0B");
    EXPECT_EQ(human_size(10ULL << 30), "10G");
    EXPECT_EQ(human_size(1ULL << 30), "1024M");
    EXPECT_EQ(human_size(9999), "9999B");
    EXPECT_EQ(human_size(10000), "10K");
}

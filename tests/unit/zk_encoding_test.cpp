// Value encodings (docs/wire-contract.md §1.2) as the zk helpers produce them.
#include <pvc/zk.hpp>

#include <gtest/gtest.h>

using namespace pvc::zk;

TEST(ZkEncoding, PyBoolIsCapitalised) {
    EXPECT_EQ(py_bool(true), "True");
    EXPECT_EQ(py_bool(false), "False");
}

TEST(ZkEncoding, PyFloatMatchesPythonRepr) {
    EXPECT_EQ(py_float(0.0), "0.0");
    EXPECT_EQ(py_float(-0.0), "-0.0");
    EXPECT_EQ(py_float(0.52), "0.52");
    EXPECT_EQ(py_float(12.5), "12.5");
    EXPECT_EQ(py_float(1.0), "1.0");
    EXPECT_EQ(py_float(100.0), "100.0");
    EXPECT_EQ(py_float(0.1 + 0.2), "0.30000000000000004");
    EXPECT_EQ(py_float(1e15), "1000000000000000.0");
    EXPECT_EQ(py_float(1e16), "1e+16");
    EXPECT_EQ(py_float(1.5e22), "1.5e+22");
    EXPECT_EQ(py_float(0.0001), "0.0001");
    EXPECT_EQ(py_float(0.00001), "1e-05");
    EXPECT_EQ(py_float(1.5e-7), "1.5e-07");
    EXPECT_EQ(py_float(-2.25), "-2.25");
    EXPECT_EQ(py_float(123456789.123), "123456789.123");
}

TEST(ZkEncoding, LenientBool) {
    for (auto t : {"y", "YES", "t", "True", "on", "1", "true"}) EXPECT_EQ(lenient_bool(t), true) << t;
    for (auto f : {"n", "No", "F", "false", "OFF", "0"}) EXPECT_EQ(lenient_bool(f), false) << f;
    for (auto e : {"", "maybe", "2", "yess"}) EXPECT_EQ(lenient_bool(e), std::nullopt) << e;
}

TEST(ZkEncoding, ConnectStringAddsDefaultPort) {
    EXPECT_EQ(connect_string({"pvchv1", "pvchv2:2281", "10.0.0.3"}), "pvchv1:2181,pvchv2:2281,10.0.0.3:2181");
    EXPECT_EQ(connect_string({}), "");
}

TEST(ZkEncoding, StatusAndEventNames) {
    EXPECT_STREQ(to_string(Status::bad_version), "bad_version");
    EXPECT_STREQ(to_string(SessionEvent::expired_recovered), "expired_recovered");
}

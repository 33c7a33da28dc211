#include "slurm/hostlist.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dlscale::slurm {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, ExpandsSlurmsSyntax) {
  EXPECT_EQ(expand_hostlist("n[1-3,7],m05"), (Hosts{"n1", "n2", "n3", "n7", "m05"}));
  EXPECT_EQ(expand_hostlist("node01"), (Hosts{"node01"}));
  EXPECT_EQ(expand_hostlist("lab-h[0-1]"), (Hosts{"lab-h0", "lab-h1"}));
  EXPECT_EQ(expand_hostlist("nid[08-10]"), (Hosts{"nid08", "nid09", "nid10"}));
  EXPECT_EQ(expand_hostlist("c[098-101]"), (Hosts{"c098", "c099", "c100", "c101"}));
  EXPECT_EQ(expand_hostlist("x[9-11]"), (Hosts{"x9", "x10", "x11"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]"), (Hosts{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("a[1]-ib,b"), (Hosts{"a1-ib", "b"}));
  EXPECT_EQ(expand_hostlist("a b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand_hostlist("n[3,1]"), (Hosts{"n3", "n1"}));  // Slurm keeps the written order
  EXPECT_EQ(expand_hostlist("n[1-100000]").size(), 100000u);
}

TEST(Hostlist, FirstHostWithoutExpandingTheRest) {
  EXPECT_EQ(first_host("n[1-3,7],m05"), "n1");
  EXPECT_EQ(first_host("m05,n[1-3]"), "m05");
  EXPECT_EQ(first_host("r[2-3]n[08-10]"), "r2n08");
  EXPECT_EQ(first_host("lab-h[0-1]"), "lab-h0");
  EXPECT_EQ(first_host("big[1-99999999]"), "big1");  // not allocated
}

TEST(Hostlist, MalformedListsAreNamed) {
  for (const char* bad : {"", ",", "a,,b", "n[1-3", "n1-3]", "n[[1]]", "n[3-1]", "n[]", "n[a-b]", "n[1-]",
                          "n[1-9999999]", "n[1-1000][1-2000]"}) {
    try {
      expand_hostlist(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("host list '") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(first_host("n[1-3"), Error);
  EXPECT_THROW(first_host("n[x]"), Error);
}

}  // namespace
}  // namespace dlscale::slurm

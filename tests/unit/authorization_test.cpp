// Which polkit action a D-Bus write needs, and what a refusal says.
#include "daemon/authorization.h"

#include <gtest/gtest.h>

namespace nvshare::daemon {
namespace {

TEST(RequiredAction, RootIsNeverAskedAbout)
{
    EXPECT_EQ(required_action({Operation::ChangeSettings, 0}), std::nullopt);
    EXPECT_EQ(required_action({Operation::Revoke, 0, 1000}), std::nullopt);
    EXPECT_EQ(required_action({Operation::Revoke, 0, 0}), std::nullopt);
}

TEST(RequiredAction, SettingsNeedSetSettingsWhoeverAsks)
{
    EXPECT_EQ(required_action({Operation::ChangeSettings, 1000}), kActionSetSettings);
    EXPECT_EQ(required_action({Operation::ChangeSettings, 1000, 1000}), kActionSetSettings);
    EXPECT_EQ(required_action({Operation::ChangeSettings, kUnknownUid}), kActionSetSettings);
}

TEST(RequiredAction, RevokingOnesOwnClientNeedsRevokeOwn)
{
    EXPECT_EQ(required_action({Operation::Revoke, 1000, 1000}), kActionRevokeOwn);
    EXPECT_EQ(required_action({Operation::Revoke, 65534, 65534}), kActionRevokeOwn);
}

TEST(RequiredAction, RevokingAnotherUsersClientNeedsRevoke)
{
    EXPECT_EQ(required_action({Operation::Revoke, 1000, 1001}), kActionRevoke);
    EXPECT_EQ(required_action({Operation::Revoke, 1000, 0}), kActionRevoke);  // root's client
}

TEST(RequiredAction, AnUnknownCallerOwnsNothing)
{
    // The bus driver did not say who called: not root, and no client is its own.
    EXPECT_EQ(required_action({Operation::Revoke, kUnknownUid, kUnknownUid}), kActionRevoke);
    EXPECT_EQ(required_action({Operation::Revoke, kUnknownUid, 1000}), kActionRevoke);
}

TEST(DenialMessage, NamesWhatTheActionAndWhy)
{
    const auto denied =
        denial_message("changing nvshare settings", kActionSetSettings, Verdict::Denied);
    EXPECT_EQ(denied,
              "changing nvshare settings needs root or polkit's authorization for "
              "org.nvshare.scheduler1.set-settings, which polkit denied");
    EXPECT_EQ(denial_message("revoking a client's lock", kActionRevoke, Verdict::Unavailable),
              "revoking a client's lock needs root or polkit's authorization for "
              "org.nvshare.scheduler1.revoke, and polkit is not running");
    EXPECT_NE(denial_message("x", kActionRevoke, Verdict::Challenge).find("authentication"),
              std::string::npos);
    EXPECT_EQ(denial_message("x", kActionRevoke, Verdict::Failed,
                             "org.freedesktop.DBus.Error.Timeout: Connection timed out"),
              "x needs root or polkit's authorization for org.nvshare.scheduler1.revoke, and "
              "asking polkit failed (org.freedesktop.DBus.Error.Timeout: Connection timed out)");
    EXPECT_EQ(denial_message("x", kActionRevoke, Verdict::Failed),
              "x needs root or polkit's authorization for org.nvshare.scheduler1.revoke, and "
              "asking polkit failed");
}

}  // namespace
}  // namespace nvshare::daemon

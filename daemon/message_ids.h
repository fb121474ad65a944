// The MESSAGE_ID of each kind of event nvshared logs, for
// `journalctl MESSAGE_ID=…` and log processors. Made once with
// `systemd-id128 new`; nvshared(8) lists them. Never change one: scripts
// match on them.
#pragma once

namespace nvshare::daemon::message_ids {

inline constexpr const char* kRegistered = "5f61da9b09614cb491415f665128a0ec";
inline constexpr const char* kGranted = "c17d4b65563c48e8ae5ff8ca90ef0149";
inline constexpr const char* kWaiting = "0fe1944adbbc444e8a2d283f403e7607";
inline constexpr const char* kDrop = "632caac7eff4498e84db0639a1e542b7";
inline constexpr const char* kRevoked = "70d9a67400864cf9a15b71eb736c7b82";
inline constexpr const char* kReleased = "ca19272ca87c4e65a7a8ffc20626d6e0";
inline constexpr const char* kSettingChanged = "5745dcd5300a4ab8b8473bcafeba01ad";
inline constexpr const char* kGone = "2d621ee035964836ba0825d14b4a602d";

}  // namespace nvshare::daemon::message_ids

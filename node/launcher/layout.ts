import { NETNS_ADDON_FILE } from '../datapath/native.js';

/**
 * What the single executable loads from its own directory (it holds everything else): the `netlink` package's
 * binding and our setns addon. The build writes them beside it and the installer copies them with it.
 */
export const SEA_NATIVE_FILES = ['netlink.node', NETNS_ADDON_FILE] as const;

/** Entry point of the in-guest IPv6 suite (guest-main.ts). */
import { guestMain } from './guest-main.js';
import { ipv6Cases } from './ipv6-cases.js';

await guestMain(ipv6Cases);

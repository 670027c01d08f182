/** Entry point of the in-guest ipvlan suite (guest-main.ts). */
import { guestMain } from './guest-main.js';
import { guestCases } from './plugin-cases.js';

await guestMain(guestCases);

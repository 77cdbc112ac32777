// The built-in sentence generator (sentences.h).
#include "experiments/asr/sentences.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace wavetrain::experiments::asr {
namespace {

using Words = std::vector<const char*>;

const Words kOnes = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                     "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                     "eighteen", "nineteen"};
const Words kTens = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
const Words kOrdinalOnes = {"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
                            "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
                            "seventeenth", "eighteenth", "nineteenth"};

const Words kNames = {
    "alice", "amelia", "andrew", "anna", "arthur", "benjamin", "carlos", "caroline", "charlotte", "daniel",
    "david", "deborah", "edward", "elena", "emily", "emma", "fatima", "felix", "george", "grace",
    "hannah", "harry", "isabel", "jack", "james", "jasmine", "john", "julia", "karen", "kevin",
    "laura", "leo", "lucas", "lucy", "maria", "mark", "martin", "mary", "matthew", "michael",
    "mohammed", "nadia", "nathan", "nina", "oliver", "olivia", "oscar", "patrick", "paul", "peter",
    "rachel", "robert", "rosa", "samuel", "sarah", "simon", "sofia", "sophie", "thomas", "victor",
    "william", "zoe", "aaron", "abigail", "adrian", "aisha", "albert", "alex", "amir", "angela", "beatrice", "bruno",
    "camille", "chloe", "claire", "connor", "diana", "dmitri", "dylan", "eleanor", "ethan", "eva", "fiona", "frank",
    "gabriel", "hector", "helen", "hugo", "ian", "ingrid", "irene", "ivan", "jacob", "jonas", "joseph", "kate",
    "keith", "lena", "lily", "louis", "marco", "megan", "miguel", "monica", "noah", "omar", "pablo", "priya",
    "quentin", "raymond", "rebecca", "ruth", "sean", "stella", "tanya", "teresa", "tim", "ursula", "vera", "walter",
    "yusuf", "zachary"};
const Words kCities = {
    "amsterdam", "athens", "berlin", "boston", "brussels", "cairo", "chicago", "dallas", "denver", "dublin",
    "edinburgh", "glasgow", "helsinki", "houston", "istanbul", "lisbon", "london", "madrid", "manchester",
    "melbourne", "miami", "milan", "montreal", "moscow", "munich", "nairobi", "oslo", "paris", "prague",
    "rome", "seattle", "seoul", "stockholm", "sydney", "tokyo", "toronto", "vancouver", "vienna", "warsaw",
    "zurich", "adelaide", "antwerp", "barcelona", "belfast", "bergen", "bordeaux", "bristol", "budapest", "calgary",
    "cardiff", "copenhagen", "delhi", "florence", "geneva", "hamburg", "krakow", "leeds", "lima", "liverpool",
    "lyon", "marseille", "mumbai", "naples", "nice", "ottawa", "perth", "porto", "quebec", "riga", "salzburg",
    "santiago", "seville", "singapore", "tallinn", "turin", "valencia", "venice", "winnipeg", "york"};
const Words kDays = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
const Words kRelativeDays = {"today", "tomorrow", "tonight", "this evening", "next week", "this weekend"};
const Words kMonths = {"january", "february", "march", "april", "may", "june", "july", "august", "september",
                       "october", "november", "december"};
const Words kItems = {
    "apples", "bananas", "batteries", "beans", "bread", "butter", "candles", "carrots", "cheese", "chocolate",
    "coffee", "cookies", "eggs", "envelopes", "flowers", "garlic", "grapes", "lemons", "light bulbs", "milk",
    "noodles", "onions", "oranges", "pasta", "peppers", "potatoes", "rice", "salt", "soap", "stamps",
    "strawberries", "sugar", "tea bags", "tissues", "tomatoes", "towels", "water bottles", "yogurt", "almonds",
    "avocados", "bagels", "basil", "blueberries", "broccoli", "cabbages", "cereal", "cherries", "chickpeas",
    "cucumbers", "flour", "ginger", "honey", "jam", "ketchup", "lentils", "lettuce", "mangoes", "mushrooms",
    "mustard", "napkins", "oats", "olives", "pancakes", "peaches", "pears", "pineapples", "plums", "raisins",
    "sausages", "spinach", "toothpaste", "vinegar", "walnuts", "sponges"};
const Words kDevices = {"lights", "heating", "radio", "television", "fan", "oven", "kettle", "dishwasher",
                        "washing machine", "air conditioning", "alarm", "printer", "speaker", "lamp", "coffee machine",
                        "humidifier", "projector", "sprinkler", "freezer", "microwave", "toaster", "router"};
const Words kRooms = {"kitchen", "living room", "bedroom", "bathroom", "office", "garage", "hallway",
                      "dining room", "garden", "basement", "attic", "nursery"};
const Words kTasks = {
    "buy a birthday present", "call the dentist", "water the plants", "feed the cat", "walk the dog",
    "pay the electricity bill", "book a table", "send the report", "pick up the kids", "return the library books",
    "renew my passport", "clean the windows", "check the tyres", "take my medicine", "back up the laptop",
    "cancel the gym membership", "order new glasses", "bake a cake", "fix the bicycle", "post the letters",
    "collect the parcel", "vacuum the carpet", "iron the shirts", "repair the fence", "defrost the freezer",
    "schedule a haircut", "prepare the presentation", "wrap the gifts", "sweep the porch", "polish the shoes",
    "visit grandmother", "charge the camera", "print the tickets", "sign the contract", "mow the lawn"};
const Words kGenres = {"jazz", "classical music", "rock music", "the news", "a podcast", "some blues",
                       "folk songs", "the radio", "relaxing music", "the top forty", "an audiobook", "piano music"};
const Words kWeather = {"rain", "snow", "sunshine", "wind", "fog", "thunder", "frost", "a heatwave"};
const Words kColours = {"red", "green", "blue", "yellow", "purple", "orange", "white", "black", "grey", "pink",
                        "brown", "silver", "golden", "turquoise", "beige", "navy"};
const Words kStreets = {"oak", "maple", "elm", "cedar", "willow", "station", "harbour", "market", "church", "mill",
                        "bridge", "castle", "garden", "park", "river", "victoria", "king", "queen", "high", "north"};
const Words kStreetKinds = {"street", "road", "avenue", "lane", "square", "drive"};
const Words kDrinks = {"cappuccino", "espresso", "latte", "hot chocolate", "green tea", "lemonade", "orange juice",
                       "smoothie", "iced coffee", "mineral water"};
const Words kSizes = {"small", "medium", "large", "extra large"};
const Words kUnits = {"minutes", "hours", "days", "weeks", "seconds"};
const Words kVehicles = {"train", "bus", "flight", "ferry", "coach", "tram"};

class Picker {
 public:
  explicit Picker(std::mt19937_64& rng) : rng_(rng) {}
  // Uniform integer in [lo, hi], from the raw engine: std::uniform_int_distribution differs between
  // standard libraries, and a corpus must be the same everywhere for a seed.
  int between(int lo, int hi) { return lo + static_cast<int>(rng_() % static_cast<uint64_t>(hi - lo + 1)); }
  const char* pick(const Words& w) { return w[static_cast<size_t>(between(0, static_cast<int>(w.size()) - 1))]; }
  bool chance(int percent) { return between(1, 100) <= percent; }

 private:
  std::mt19937_64& rng_;
};

std::string time_of_day(Picker& p) {
  const int hour = p.between(1, 12);
  const std::string h = spell_number(hour);
  switch (p.between(0, 6)) {
    case 0: return h + " o'clock";
    case 1: return "half past " + h;
    case 2: return "a quarter past " + h;
    case 3: return "a quarter to " + h;
    case 4: return h + " " + spell_number(p.between(1, 5) * 10);
    case 5: return h + " " + spell_number(p.between(21, 59)) + (p.chance(50) ? " in the morning" : " in the evening");
    default: return p.chance(50) ? "noon" : "midnight";
  }
}

std::string date(Picker& p) {
  const std::string month = p.pick(kMonths), day = spell_ordinal(p.between(1, 28));
  switch (p.between(0, 3)) {
    case 0: return "the " + day + " of " + month;
    case 1: return month + " " + day;
    case 2: return std::string(p.pick(kDays)) + " the " + day;
    default: return std::string("next ") + p.pick(kDays);
  }
}

std::string when(Picker& p) {
  switch (p.between(0, 2)) {
    case 0: return std::string(p.pick(kRelativeDays)) + " at " + time_of_day(p);
    case 1: return "on " + date(p);
    default: return "at " + time_of_day(p);
  }
}

std::string amount(Picker& p) {
  const int n = p.chance(70) ? p.between(2, 20) : p.between(21, 999);
  return spell_number(n);
}

std::string sentence(Picker& p) {
  const std::string name = p.pick(kNames), other = p.pick(kNames);
  switch (p.between(0, 23)) {
    case 0: return "set an alarm for " + time_of_day(p) + (p.chance(40) ? std::string(" ") + p.pick(kRelativeDays) : "");
    case 1: return "call " + name + " " + when(p);
    case 2: return "remind me to " + std::string(p.pick(kTasks)) + " " + when(p);
    case 3: return "play " + std::string(p.pick(kGenres)) + " in the " + p.pick(kRooms);
    case 4: return std::string("turn ") + (p.chance(50) ? "on" : "off") + " the " + p.pick(kDevices) + " in the " + p.pick(kRooms);
    case 5: return "add " + amount(p) + " " + p.pick(kItems) + " to my shopping list";
    case 6: return "what is the weather in " + std::string(p.pick(kCities)) + " " + p.pick(kRelativeDays);
    case 7: return "move my meeting with " + name + " to " + p.pick(kDays) + " at " + time_of_day(p);
    case 8: return "the " + std::string(p.pick(kVehicles)) + " to " + p.pick(kCities) + " leaves at " + time_of_day(p) +
                   " from platform " + spell_number(p.between(1, 24));
    case 9: return name + " owes " + other + " " + amount(p) + " dollars";
    case 10: return "set a timer for " + amount(p) + " " + p.pick(kUnits);
    case 11: return "send a message to " + name + " saying i will be there " + when(p);
    case 12: return "is there going to be " + std::string(p.pick(kWeather)) + " in " + p.pick(kCities) + " on " + p.pick(kDays);
    case 13: return "book a table for " + spell_number(p.between(2, 12)) + " " + when(p);
    case 14: return name + "'s birthday is on " + date(p);
    case 15: return "paint the " + std::string(p.pick(kRooms)) + " " + p.pick(kColours) + " before " + date(p);
    case 16: return "how long does the " + std::string(p.pick(kVehicles)) + " from " + p.pick(kCities) + " to " +
                    p.pick(kCities) + " take";
    case 17: return "the temperature in the " + std::string(p.pick(kRooms)) + " is " + spell_number(p.between(10, 30)) + " degrees";
    case 18: return "ask " + name + " and " + other + " to " + p.pick(kTasks) + " " + when(p);
    case 19: return "flight " + spell_number(p.between(100, 999)) + " to " + p.pick(kCities) + " is delayed by " +
                    amount(p) + " minutes";
    case 20: return "navigate to " + spell_number(p.between(1, 199)) + " " + p.pick(kStreets) + " " + p.pick(kStreetKinds);
    case 21: return "order a " + std::string(p.pick(kSizes)) + " " + p.pick(kDrinks) + " for " + name;
    case 22: return "meet " + name + " at the corner of " + p.pick(kStreets) + " " + p.pick(kStreetKinds) + " and " +
                    p.pick(kStreets) + " " + p.pick(kStreetKinds) + " " + when(p);
    default: return "how far is " + std::string(p.pick(kCities)) + " from " + p.pick(kCities);
  }
}

}  // namespace

std::string spell_number(int n) {
  if (n < 20) return kOnes[static_cast<size_t>(n)];
  if (n < 100) return std::string(kTens[static_cast<size_t>(n / 10)]) + (n % 10 ? std::string(" ") + kOnes[static_cast<size_t>(n % 10)] : "");
  return std::string(kOnes[static_cast<size_t>(n / 100)]) + " hundred" + (n % 100 ? " " + spell_number(n % 100) : "");
}

std::string spell_ordinal(int n) {
  if (n < 20) return kOrdinalOnes[static_cast<size_t>(n)];
  if (n % 10 == 0) return n == 20 ? "twentieth" : "thirtieth";
  return std::string(kTens[static_cast<size_t>(n / 10)]) + " " + kOrdinalOnes[static_cast<size_t>(n % 10)];
}

SentenceGenerator::SentenceGenerator(uint64_t seed) : rng_(seed) {}

std::string SentenceGenerator::next() {
  Picker p(rng_);
  return sentence(p);
}

std::vector<std::string> SentenceGenerator::vocabulary() {
  std::set<std::string> words;
  const auto add = [&](const std::string& text) {
    std::istringstream in(text);
    for (std::string w; in >> w;) words.insert(w);
  };
  for (int n = 0; n < 1000; ++n) add(spell_number(n));
  for (int n = 1; n <= 31; ++n) add(spell_ordinal(n));
  for (const Words* list : {&kNames, &kCities, &kDays, &kRelativeDays, &kMonths, &kItems, &kDevices, &kRooms, &kTasks,
                            &kGenres, &kWeather, &kColours, &kUnits, &kVehicles, &kStreets, &kStreetKinds, &kDrinks, &kSizes})
    for (const char* w : *list) add(w);
  for (const char* name : kNames) words.insert(std::string(name) + "'s");
  // The templates' own words.
  add("set an alarm for call remind me to play in the turn on off add my shopping list what is weather move "
      "meeting with at leaves from platform owes dollars a timer send message saying i will be there going "
      "there book table for birthday paint before how long does take temperature degrees ask and flight delayed "
      "by of next o'clock half past quarter noon midnight morning evening navigate order a meet corner far");
  return {words.begin(), words.end()};
}

std::string normalize_transcript(const std::string& line, bool* has_digit) {
  if (has_digit) *has_digit = false;
  std::string out;
  bool space = true;  // drops leading spaces and collapses runs
  for (char c : line) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c >= '0' && c <= '9' && has_digit) *has_digit = true;
    if ((c >= 'a' && c <= 'z') || c == '\'') {
      out += c;
      space = false;
    } else if (!space) {
      out += ' ';
      space = true;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace wavetrain::experiments::asr
